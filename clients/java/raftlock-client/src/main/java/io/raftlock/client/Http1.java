package io.raftlock.client;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.locks.ReentrantLock;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;

/**
 * A lean HTTP/1.1 client for the transport: kept-alive connections, a pool
 * per endpoint, each request written with one write and its answer read
 * straight from the socket (status line, headers, a Content-Length or
 * chunked body). Connections are blocking {@link SocketChannel}s, so an
 * interrupt of the calling thread ends the exchange at once (the channel is
 * closed: ClosedByInterruptException), and virtual threads park rather than
 * pin. Safe for concurrent use; no monitor is held across I/O.
 */
final class Http1 {
    /** Idle connections kept per endpoint for reuse (more are closed). */
    static final int MAX_IDLE_PER_ENDPOINT = 64;
    private static final int MAX_HEAD = 64 << 10;
    private static final int MAX_BODY = 64 << 20;

    /** An answer. */
    record Answer(int status, Map<String, String> headers, byte[] body) {
    }

    /** The request was not sent: the connection could not be made. */
    static final class NotSentException extends IOException {
        NotSentException(String m, Throwable cause) {
            super(m, cause);
        }
    }

    private final SSLContext tls;
    private final ReentrantLock mu = new ReentrantLock();
    private final Map<String, ArrayDeque<Conn>> idle = new HashMap<>();

    Http1(SSLContext tls) {
        this.tls = tls;
    }

    /** One kept-alive connection. */
    private static final class Conn {
        final SocketChannel ch;
        final Socket sock; // the channel's socket, or TLS over it
        final InputStream in;
        final OutputStream out;
        final String hostport;
        final byte[] buf = new byte[16 << 10];
        int pos;
        int lim;

        Conn(SocketChannel ch, Socket sock, String hostport) throws IOException {
            this.ch = ch;
            this.sock = sock;
            this.in = sock.getInputStream();
            this.out = sock.getOutputStream();
            this.hostport = hostport;
        }

        void close() {
            try {
                sock.close();
            } catch (IOException e) {
                // closing: nothing to do
            }
            try {
                ch.close();
            } catch (IOException e) {
                // closing: nothing to do
            }
        }

        /** Whether an idle connection is unusable: the server closed it or sent something unasked. */
        boolean dropped() {
            if (pos != lim) {
                return true;
            }
            try {
                ch.configureBlocking(false);
                try {
                    return ch.read(ByteBuffer.allocate(1)) != 0;
                } finally {
                    ch.configureBlocking(true);
                }
            } catch (IOException e) {
                return true;
            }
        }
    }

    /**
     * Sends one request to host:port ({@code secure}: over TLS) and returns its
     * answer, within timeoutNanos. NotSentException: no connection; any
     * other IOException: the request may have been sent.
     */
    Answer exchange(String host, int port, boolean secure, String method, String path, String extraHeaders,
            byte[] body, long timeoutNanos) throws IOException {
        String hostport = host.contains(":") && !host.startsWith("[") ? "[" + host + "]:" + port : host + ":" + port;
        long end = System.nanoTime() + timeoutNanos;
        Conn c = take(hostport, host, port, secure, timeoutNanos);
        boolean ok = false;
        try {
            StringBuilder h = new StringBuilder(256).append(method).append(' ').append(path)
                    .append(" HTTP/1.1\r\nHost: ").append(c.hostport).append("\r\n").append(extraHeaders);
            if (body != null) {
                h.append("Content-Type: application/json\r\nContent-Length: ").append(body.length).append("\r\n");
            } else if (!method.equals("GET")) {
                h.append("Content-Length: 0\r\n");
            }
            h.append("\r\n");
            byte[] head = h.toString().getBytes(StandardCharsets.ISO_8859_1);
            byte[] req = head;
            if (body != null) {
                req = new byte[head.length + body.length];
                System.arraycopy(head, 0, req, 0, head.length);
                System.arraycopy(body, 0, req, head.length, body.length);
            }
            c.out.write(req);
            c.out.flush();
            Answer a = read(c, end);
            ok = !"close".equalsIgnoreCase(a.headers.getOrDefault("connection", ""));
            return a;
        } finally {
            if (ok) {
                give(c);
            } else {
                c.close();
            }
        }
    }

    private Conn take(String hostport, String host, int port, boolean secure, long timeoutNanos) throws IOException {
        while (true) {
            Conn c = null;
            mu.lock();
            try {
                ArrayDeque<Conn> q = idle.get(hostport);
                if (q != null) {
                    c = q.pollLast();
                }
            } finally {
                mu.unlock();
            }
            if (c == null) {
                break;
            }
            if (!c.dropped()) {
                return c;
            }
            c.close();
        }
        SocketChannel ch = SocketChannel.open();
        try {
            ch.socket().connect(new InetSocketAddress(host, port), (int) Math.max(1, Math.min(Integer.MAX_VALUE, timeoutNanos / 1_000_000)));
            ch.socket().setTcpNoDelay(true);
        } catch (IOException e) {
            ch.close();
            if (Thread.currentThread().isInterrupted()) {
                throw e;
            }
            throw new NotSentException(e.getClass().getSimpleName() + (e.getMessage() == null ? "" : " (" + e.getMessage() + ")"), e);
        }
        Socket s = ch.socket();
        if (secure) {
            try {
                SSLContext ctx = tls != null ? tls : SSLContext.getDefault();
                SSLSocket ss = (SSLSocket) ctx.getSocketFactory().createSocket(s, host, port, true);
                SSLParameters p = ss.getSSLParameters();
                p.setEndpointIdentificationAlgorithm("HTTPS");
                ss.setSSLParameters(p);
                ss.setSoTimeout((int) Math.max(1, Math.min(Integer.MAX_VALUE, timeoutNanos / 1_000_000)));
                ss.startHandshake();
                s = ss;
            } catch (IOException | java.security.NoSuchAlgorithmException e) {
                ch.close();
                if (e instanceof IOException io && Thread.currentThread().isInterrupted()) {
                    throw io;
                }
                throw new NotSentException("TLS: " + e.getClass().getSimpleName() + (e.getMessage() == null ? "" : " (" + e.getMessage() + ")"), e);
            }
        }
        return new Conn(ch, s, hostport);
    }

    private void give(Conn c) {
        mu.lock();
        try {
            ArrayDeque<Conn> q = idle.computeIfAbsent(c.hostport, k -> new ArrayDeque<>());
            if (q.size() < MAX_IDLE_PER_ENDPOINT) {
                q.addLast(c);
                return;
            }
        } finally {
            mu.unlock();
        }
        c.close();
    }

    /** Closes the idle connections. */
    void close() {
        mu.lock();
        try {
            for (ArrayDeque<Conn> q : idle.values()) {
                for (Conn c : q) {
                    c.close();
                }
                q.clear();
            }
        } finally {
            mu.unlock();
        }
    }

    private static void fill(Conn c, long end) throws IOException {
        long left = end - System.nanoTime();
        if (left <= 0) {
            throw new SocketTimeoutException("timed out");
        }
        c.sock.setSoTimeout((int) Math.max(1, Math.min(Integer.MAX_VALUE, left / 1_000_000)));
        if (c.pos > 0 && c.pos == c.lim) {
            c.pos = c.lim = 0;
        }
        if (c.lim == c.buf.length) {
            throw new IOException("answer line too long");
        }
        int n = c.in.read(c.buf, c.lim, c.buf.length - c.lim);
        if (n < 0) {
            throw new IOException("connection closed");
        }
        c.lim += n;
    }

    /** The next line (without CRLF), as ISO-8859-1. */
    private static String line(Conn c, long end) throws IOException {
        int scanned = c.pos;
        while (true) {
            for (int i = scanned; i + 1 < c.lim; i++) {
                if (c.buf[i] == '\r' && c.buf[i + 1] == '\n') {
                    String s = new String(c.buf, c.pos, i - c.pos, StandardCharsets.ISO_8859_1);
                    c.pos = i + 2;
                    return s;
                }
            }
            scanned = Math.max(c.pos, c.lim - 1);
            if (c.pos > 0) { // make room: move the partial line to the front
                System.arraycopy(c.buf, c.pos, c.buf, 0, c.lim - c.pos);
                scanned -= c.pos;
                c.lim -= c.pos;
                c.pos = 0;
            }
            fill(c, end);
        }
    }

    private static byte[] bytes(Conn c, int n, long end) throws IOException {
        byte[] out = new byte[n];
        int got = 0;
        while (got < n) {
            if (c.pos == c.lim) {
                fill(c, end);
            }
            int k = Math.min(n - got, c.lim - c.pos);
            System.arraycopy(c.buf, c.pos, out, got, k);
            c.pos += k;
            got += k;
        }
        return out;
    }

    private static Answer read(Conn c, long end) throws IOException {
        int status;
        Map<String, String> headers;
        String version;
        do {
            String sl = line(c, end);
            String[] parts = sl.split(" ", 3);
            if (parts.length < 2 || !parts[0].startsWith("HTTP/1.") || !parts[1].matches("[0-9]{3}")) {
                throw new IOException("not an HTTP/1.1 answer (status line \"" + sl.substring(0, Math.min(40, sl.length())) + "\")");
            }
            version = parts[0];
            status = Integer.parseInt(parts[1]);
            headers = new HashMap<>();
            int size = 0;
            for (String h = line(c, end); !h.isEmpty(); h = line(c, end)) {
                size += h.length();
                if (size > MAX_HEAD) {
                    throw new IOException("not an HTTP/1.1 answer (header too long)");
                }
                int colon = h.indexOf(':');
                if (colon <= 0) {
                    throw new IOException("not an HTTP/1.1 answer (malformed header)");
                }
                headers.put(h.substring(0, colon).trim().toLowerCase(Locale.ROOT), h.substring(colon + 1).trim());
            }
        } while (status >= 100 && status < 200);
        if (version.equals("HTTP/1.0") && !"keep-alive".equalsIgnoreCase(headers.getOrDefault("connection", ""))) {
            headers.put("connection", "close");
        }
        if (status == 204 || status == 304) {
            return new Answer(status, headers, new byte[0]);
        }
        if ("chunked".equalsIgnoreCase(headers.getOrDefault("transfer-encoding", ""))) {
            java.io.ByteArrayOutputStream body = new java.io.ByteArrayOutputStream();
            while (true) {
                String sz = line(c, end);
                int semi = sz.indexOf(';');
                int n;
                try {
                    n = Integer.parseInt((semi >= 0 ? sz.substring(0, semi) : sz).trim(), 16);
                } catch (NumberFormatException e) {
                    throw new IOException("not an HTTP/1.1 answer (bad chunk size)");
                }
                if (n == 0) {
                    while (!line(c, end).isEmpty()) {
                        // trailers
                    }
                    return new Answer(status, headers, body.toByteArray());
                }
                if (n < 0 || body.size() + (long) n > MAX_BODY) {
                    throw new IOException("not an HTTP/1.1 answer (answer too large)");
                }
                body.write(bytes(c, n, end));
                if (!line(c, end).isEmpty()) {
                    throw new IOException("not an HTTP/1.1 answer (bad chunk end)");
                }
            }
        }
        String cl = headers.get("content-length");
        if (cl != null) {
            long n;
            try {
                n = Long.parseLong(cl);
            } catch (NumberFormatException e) {
                throw new IOException("not an HTTP/1.1 answer (bad Content-Length)");
            }
            if (n < 0 || n > MAX_BODY) {
                throw new IOException("not an HTTP/1.1 answer (bad Content-Length)");
            }
            return new Answer(status, headers, bytes(c, (int) n, end));
        }
        // No length: the body runs to the end of the connection.
        java.io.ByteArrayOutputStream body = new java.io.ByteArrayOutputStream();
        body.write(c.buf, c.pos, c.lim - c.pos);
        c.pos = c.lim;
        byte[] chunk = new byte[16 << 10];
        while (true) {
            long left = end - System.nanoTime();
            if (left <= 0) {
                throw new SocketTimeoutException("timed out");
            }
            c.sock.setSoTimeout((int) Math.max(1, left / 1_000_000));
            int n = c.in.read(chunk);
            if (n < 0) {
                break;
            }
            if (body.size() + n > MAX_BODY) {
                throw new IOException("not an HTTP/1.1 answer (answer too large)");
            }
            body.write(chunk, 0, n);
        }
        headers.put("connection", "close");
        return new Answer(status, headers, body.toByteArray());
    }
}
