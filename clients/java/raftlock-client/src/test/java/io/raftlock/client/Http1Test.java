package io.raftlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/** The transport's HTTP/1.1 exchange (Http1) against servers on 127.0.0.1 (no cluster). */
class Http1Test {
    private HttpServer server;
    private ServerSocket raw;

    @AfterEach
    void stop() throws IOException {
        if (server != null) {
            server.stop(0);
        }
        if (raw != null) {
            raw.close();
        }
    }

    private static Transport transport(String addr) {
        return new Transport(List.of(addr), null, "tok-secret", Duration.ofSeconds(2));
    }

    private static Transport.Call call() {
        return new Transport.Call().deadline(System.nanoTime() + TimeUnit.SECONDS.toNanos(10));
    }

    /** A JDK HttpServer answering {"n":...}; records each request's client port; chunked when asked. */
    private String serve(Set<Integer> ports, boolean chunked) throws IOException {
        server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        server.createContext("/", ex -> {
            ex.getRequestBody().readAllBytes();
            ports.add(ex.getRemoteAddress().getPort());
            byte[] b = "{\"n\":1,\"auth\":\"ok\"}".getBytes(StandardCharsets.UTF_8);
            ex.sendResponseHeaders(200, chunked ? 0 : b.length);
            try (OutputStream o = ex.getResponseBody()) {
                o.write(b);
            }
        });
        server.start();
        return "127.0.0.1:" + server.getAddress().getPort();
    }

    @Test
    void sequentialCallsReuseOneConnection() throws Exception {
        Set<Integer> ports = ConcurrentHashMap.newKeySet();
        Transport t = transport(serve(ports, false));
        for (int i = 0; i < 5; i++) {
            assertEquals(1, t.call("POST", "/v1/x", Transport.JSON.createObjectNode(), call()).path("n").asInt());
        }
        assertEquals(1, ports.size(), "connections used: " + ports);
    }

    @Test
    void chunkedAnswersAreReadAndTheConnectionKept() throws Exception {
        Set<Integer> ports = ConcurrentHashMap.newKeySet();
        Transport t = transport(serve(ports, true));
        for (int i = 0; i < 3; i++) {
            JsonNode a = t.call("GET", "/v1/lock?name=a", null, call());
            assertEquals(1, a.path("n").asInt());
        }
        assertEquals(1, ports.size(), "connections used: " + ports);
    }

    /** A raw server: for each connection, reads one request and writes answer, then closes when told. */
    private String rawServe(String answer, boolean closeAfter, CountDownLatch closed) throws IOException {
        raw = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread th = new Thread(() -> {
            while (!raw.isClosed()) {
                try (Socket s = raw.accept()) {
                    InputStream in = s.getInputStream();
                    StringBuilder head = new StringBuilder();
                    while (!head.toString().endsWith("\r\n\r\n")) {
                        int c = in.read();
                        if (c < 0) {
                            break;
                        }
                        head.append((char) c);
                    }
                    int len = 0;
                    for (String l : head.toString().split("\r\n")) {
                        if (l.toLowerCase().startsWith("content-length:")) {
                            len = Integer.parseInt(l.substring(15).trim());
                        }
                    }
                    in.readNBytes(len);
                    s.getOutputStream().write(answer.getBytes(StandardCharsets.ISO_8859_1));
                    s.getOutputStream().flush();
                    if (!closeAfter) {
                        in.read(); // hold the connection until the client goes
                    }
                } catch (IOException e) {
                    return;
                }
                if (closed != null) {
                    closed.countDown();
                }
            }
        });
        th.setDaemon(true);
        th.start();
        return "127.0.0.1:" + raw.getLocalPort();
    }

    @Test
    void aConnectionTheServerClosedIsNotReusedForANonIdempotentRequest() throws Exception {
        // The server closes each connection after its answer, without saying
        // so (as an idle timeout does): the next open must go on a new
        // connection and succeed, not fail as an unknown outcome.
        CountDownLatch closed = new CountDownLatch(1);
        Transport t = transport(rawServe("HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n{\"n\":7}\n", true, closed));
        assertEquals(7, t.call("POST", "/v1/sessions", Transport.JSON.createObjectNode(), call()).path("n").asInt());
        assertTrue(closed.await(10, TimeUnit.SECONDS));
        assertEquals(7, t.call("POST", "/v1/sessions", Transport.JSON.createObjectNode(), call()).path("n").asInt());
    }

    @Test
    void anAnswerThatIsNotHttpIsAnUnknownOutcomeNotACrash() throws Exception {
        Transport t = transport(rawServe("SSH-2.0-nonsense\r\n\r\n", true, null));
        RaftlockException e = assertThrows(RaftlockException.class,
                () -> t.call("POST", "/v1/sessions", Transport.JSON.createObjectNode(), call()));
        assertEquals(RaftlockException.UNKNOWN_OUTCOME, e.code());
        assertTrue(e.getMessage().contains("not an HTTP/1.1 answer"), e.getMessage());
        assertFalse(e.getMessage().contains("tok-secret"), e.getMessage());
    }

    @Test
    void anInterruptEndsACallWaitingForItsAnswer() throws Exception {
        // The server reads the request and never answers.
        Transport t = transport(rawServe("", false, null));
        AtomicReference<Throwable> got = new AtomicReference<>();
        CountDownLatch sent = new CountDownLatch(1);
        Thread th = new Thread(() -> {
            try {
                sent.countDown();
                t.call("POST", "/v1/acquire", Transport.JSON.createObjectNode(),
                        new Transport.Call().idempotent().attempt(Duration.ofSeconds(60))
                                .deadline(System.nanoTime() + TimeUnit.SECONDS.toNanos(60)));
            } catch (Throwable e) {
                got.set(e);
            }
        });
        th.start();
        sent.await();
        // Interrupt until the call has ended (an interrupt before the read
        // starts is seen when it does).
        while (th.isAlive()) {
            th.interrupt();
            th.join(100);
        }
        assertTrue(got.get() instanceof InterruptedException, "got " + got.get());
    }
}
