package io.raftlock.spring;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * A TCP proxy on a free 127.0.0.1 port that can black-hole its traffic: while
 * cut, bytes both ways are read and dropped and nothing is closed (a
 * firewall's DROP), as the conformance suite's fault proxy does.
 */
final class BlackHoleProxy implements AutoCloseable {
    private final ServerSocket server;
    private final String targetHost;
    private final int targetPort;
    private final List<Socket> sockets = new CopyOnWriteArrayList<>();
    private volatile boolean cut;

    BlackHoleProxy(String target) throws IOException {
        int colon = target.lastIndexOf(':');
        targetHost = target.substring(0, colon);
        targetPort = Integer.parseInt(target.substring(colon + 1));
        server = new ServerSocket();
        server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
        Thread t = new Thread(this::accept, "proxy-accept");
        t.setDaemon(true);
        t.start();
    }

    String address() {
        return "127.0.0.1:" + server.getLocalPort();
    }

    void cut() {
        cut = true;
    }

    private void accept() {
        while (!server.isClosed()) {
            try {
                Socket c = server.accept();
                Socket u = new Socket(targetHost, targetPort);
                sockets.add(c);
                sockets.add(u);
                pump(c.getInputStream(), u.getOutputStream());
                pump(u.getInputStream(), c.getOutputStream());
            } catch (IOException e) {
                return;
            }
        }
    }

    private void pump(InputStream in, OutputStream out) {
        Thread t = new Thread(() -> {
            byte[] buf = new byte[8192];
            try {
                int n;
                while ((n = in.read(buf)) >= 0) {
                    if (!cut) {
                        out.write(buf, 0, n);
                        out.flush();
                    }
                }
            } catch (IOException e) {
                // the connection ended
            }
        }, "proxy-pump");
        t.setDaemon(true);
        t.start();
    }

    @Override
    public void close() throws IOException {
        server.close();
        for (Socket s : sockets) {
            s.close();
        }
    }
}
