package io.raftlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Set;
import java.util.concurrent.locks.ReentrantLock;
import java.util.stream.Collectors;
import jdk.jfr.consumer.RecordedEvent;
import org.junit.jupiter.api.Test;

/**
 * The pinning check itself (JDK 21+; no cluster): a virtual thread that
 * parks inside a class initializer pins its carrier even on JDK 24+ (JEP
 * 491 left that case), and the recording sees it; one that parks anywhere
 * else is not recorded; and the client-frame filter tells the client's
 * classes from the tests'.
 */
class PinnedEventsTest {
    static final ReentrantLock GATE = new ReentrantLock();

    /** Its initializer parks on {@link #GATE} while the test holds it. */
    static final class ParksInInitializer {
        static {
            GATE.lock();
            GATE.unlock();
        }

        static void touch() {
        }
    }

    private static Thread parkOnGate(Runnable body) throws Exception {
        GATE.lock();
        Thread t;
        try {
            t = PinnedEvents.startVirtual(body);
            PinnedEvents.awaitParkedIn(t, ReentrantLock.class);
        } finally {
            GATE.unlock();
        }
        t.join();
        return t;
    }

    private static List<RecordedEvent> in(List<RecordedEvent> events, String frameClass) {
        return events.stream().filter(e -> e.getStackTrace() != null && e.getStackTrace().getFrames().stream()
                .anyMatch(f -> f.getMethod().getType().getName().equals(frameClass))).collect(Collectors.toList());
    }

    @Test
    void aParkInAClassInitializerIsRecordedAsPinned() throws Exception {
        PinnedEvents.Recorded<Thread> r = PinnedEvents.during(() -> parkOnGate(ParksInInitializer::touch));
        List<RecordedEvent> mine = in(r.events(), ParksInInitializer.class.getName());
        assertFalse(mine.isEmpty(), "no " + PinnedEvents.EVENT + " of the initializer's park; recorded: " + r.events());
        Set<String> client = PinnedEvents.clientClasses();
        assertTrue(PinnedEvents.clientFrames(mine.get(0), client).isEmpty(),
                "a test class counted as the client's: " + PinnedEvents.describe(mine.get(0)));
        System.out.println("the check's own case, pinned as expected (java " + System.getProperty("java.version")
                + "): " + PinnedEvents.describe(mine.get(0)));
    }

    @Test
    void aParkOutsideAClassInitializerIsNotPinned() throws Exception {
        PinnedEvents.Recorded<Thread> r = PinnedEvents.during(() -> parkOnGate(() -> {
            GATE.lock();
            GATE.unlock();
        }));
        assertEquals(List.of(), in(r.events(), PinnedEventsTest.class.getName()).stream()
                .map(PinnedEvents::describe).collect(Collectors.toList()));
    }

    @Test
    void theClientsClassesAreTheMainSourcesOnly() throws Exception {
        Set<String> client = PinnedEvents.clientClasses();
        assertTrue(client.contains(FencedLock.class.getName()));
        assertTrue(client.contains(Session.class.getName()));
        assertFalse(client.contains(PinnedEventsTest.class.getName()));
        assertFalse(client.contains(ClusterTest.class.getName()));
    }
}
