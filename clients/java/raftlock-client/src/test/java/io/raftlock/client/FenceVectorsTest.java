package io.raftlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
    void slotSequencerNamesItsSlot() throws Exception {
        Sequencer s = Sequencer.parse("rl1:p2:9:sem");
        assertEquals(Mode.EXCLUSIVE, s.mode());
        assertEquals(2, s.slot());
        assertTrue(s.isSlot());
        assertEquals("rl1:p2:9:sem", s.toString());
        assertEquals(Sequencer.NO_SLOT, new Sequencer("a", Mode.EXCLUSIVE, 3).slot());
        Fence f = new Fence();
        f.check(s);
        assertEquals(9, f.highestSlot("sem", 2));
        assertEquals(0, f.highestExclusive("sem"));
    }
}
