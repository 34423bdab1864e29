package io.raftlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.params.provider.ValueSource;

class DurationsTest {
    @ParameterizedTest
    @CsvSource({"15s,15000", "1m0s,60000", "1.5s,1500", "500ms,500", "0s,0", "1h2m3s,3723000", "0,0"})
    void durationsFromTheWire(String text, long millis) {
        assertEquals(Duration.ofMillis(millis), Durations.fromWire(text));
    }

    @ParameterizedTest
    @ValueSource(strings = {"", "s", "15", "1x", "1.5.s"})
    void badDurationsAreRefused(String bad) {
        assertThrows(IllegalArgumentException.class, () -> Durations.fromWire(bad));
    }

    @Test
    void durationsToTheWire() {
        assertEquals("3s", Durations.toWire(Duration.ofSeconds(3)));
        assertEquals("1500ms", Durations.toWire(Duration.ofMillis(1500)));
        assertEquals("250us", Durations.toWire(Duration.ofNanos(250_000)));
    }

    @Test
    void lostAfterIsLeasePlusDelayMinusMargin() {
        // 1% of ttl + lock-delay, plus 100 ms, as the Go client (session.LostAfter).
        assertEquals(Duration.ofMillis(350), Session.lostMargin(Duration.ofSeconds(15), Duration.ofSeconds(10)));
        assertEquals(Duration.ofMillis(24650), Session.lostAfter(Duration.ofSeconds(15), Duration.ofSeconds(10)));
        assertEquals(Duration.ofMillis(890), Session.lostAfter(Duration.ofSeconds(1), Duration.ZERO));
    }

    @Test
    void sessionIdsAreLeftOutOfPathsInErrors() {
        assertEquals("/v1/sessions/*/keepalive", Transport.publicPath("/v1/sessions/secret123/keepalive"));
        assertEquals("/v1/sessions/*", Transport.publicPath("/v1/sessions/secret123"));
        assertEquals("/v1/acquire", Transport.publicPath("/v1/acquire"));
    }

    @Test
    void lockNamesWithControlCharactersAreMalformed() {
        assertThrows(MalformedSequencerException.class, () -> Sequencer.checkName("a\u0001b"));
        assertThrows(MalformedSequencerException.class, () -> Sequencer.checkName(""));
        assertThrows(MalformedSequencerException.class, () -> Sequencer.checkName("a\ud800"));
        Sequencer.checkName("jobs/é");
    }
}
