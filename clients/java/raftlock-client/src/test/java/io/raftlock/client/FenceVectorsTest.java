package io.raftlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import org.junit.jupiter.api.Test;

class FenceVectorsTest {
    private static String verdict(Fence f, String seq) {
        try {
            f.check(seq);
            return "admit";
        } catch (StaleSequencerException e) {
            return "stale";
        } catch (MalformedSequencerException e) {
            return "malformed";
        }
    }

    @Test
    void fenceGivesEverySharedVectorsVerdict() throws Exception {
        File file = new File(System.getProperty("raftlock.vectors", "../../../testdata/fence-vectors.json"));
        JsonNode root = new ObjectMapper().readTree(file);
        int steps = 0;
        for (JsonNode v : root.path("vectors")) {
            Fence f = new Fence();
            int i = 0;
            for (JsonNode st : v.path("steps")) {
                assertEquals(st.path("verdict").asText(), verdict(f, st.path("sequencer").asText()),
                        v.path("name").asText() + ", step " + i++);
                steps++;
            }
        }
        assertTrue(steps > 20, "the vectors file has steps (" + steps + ")");
    }

    @Test
    void sequencerPrintsItsCanonicalForm() {
        Sequencer s = Sequencer.parse("rl1:s:18446744073709551615:jobs/a");
        assertEquals(Mode.SHARED, s.mode());
        assertEquals("rl1:s:18446744073709551615:jobs/a", s.toString());
    }

    @Test
    void slotSequencerNamesItsSlotAndPermits() throws Exception {
        Sequencer s = Sequencer.parse("rl1:p2/3:9:sem");
        assertEquals(Mode.EXCLUSIVE, s.mode());
        assertEquals(2, s.slot());
        assertEquals(3, s.permits());
        assertEquals(3, s.config());
        assertTrue(s.isSlot());
        assertEquals("rl1:p2/3:9:sem", s.toString());
        assertEquals(Sequencer.NO_SLOT, new Sequencer("a", Mode.EXCLUSIVE, 3).slot());
        assertEquals(0, new Sequencer("a", Mode.EXCLUSIVE, 3).config());
        Fence f = new Fence();
        f.check(s);
        assertEquals(9, f.highestSlot("sem", 2));
        assertEquals(0, f.highestExclusive("sem"));
    }

    @Test
    void slotFormWithoutPermitsIsRefusedClearly() {
        MalformedSequencerException e =
                assertThrows(MalformedSequencerException.class, () -> Sequencer.parse("rl1:p2:54:pool"));
        assertTrue(e.getMessage().contains("permits"), e.getMessage());
    }

    @Test
    void invalidSlotSequencersAreMalformed() {
        Fence f = new Fence();
        for (Sequencer s : new Sequencer[] {
            new Sequencer("a", Mode.SHARED, 3, 1, 2),
            new Sequencer("a", Mode.EXCLUSIVE, 3, 2, 2),
            new Sequencer("a", Mode.EXCLUSIVE, 3, 0, 0),
            new Sequencer("a", Mode.EXCLUSIVE, 3, 0, 257),
            new Sequencer("a", Mode.EXCLUSIVE, 3, Sequencer.NO_SLOT, 2),
        }) {
            assertThrows(MalformedSequencerException.class, () -> f.check(s), s.toString());
        }
    }

    @Test
    void refusedEarlierTenureNamesBothTokens() throws Exception {
        Fence f = new Fence();
        f.check("rl1:p0/1:68:pool");
        StaleSequencerException e = assertThrows(StaleSequencerException.class, () -> f.check("rl1:p2/3:54:pool"));
        for (String want : new String[] {"54", "68", "semaphore of 3", "semaphore of 1", "kind or permits changed"}) {
            assertTrue(e.getMessage().contains(want), e.getMessage() + " lacks " + want);
        }
    }
}
