package io.raftlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.File;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.params.provider.ValueSource;

/** The SQL fence without a database: its SQL, table names and bad sequencers. */
class SqlFenceTest {
    static File testdata(String name) {
        File vectors = new File(System.getProperty("raftlock.vectors", "../../../testdata/fence-vectors.json"));
        return new File(vectors.getParentFile(), name);
    }

    @ParameterizedTest
    @EnumSource(SqlFence.Dialect.class)
    void sqlIsByteIdenticalToTheSharedFile(SqlFence.Dialect d) throws Exception {
        JsonNode want = new ObjectMapper().readTree(testdata("sqlfence-statements.json"))
                .path(d == SqlFence.Dialect.POSTGRES ? "postgres" : "mysql");
        SqlFence f = new SqlFence(d);
        assertEquals(want.path("table").asText(), f.table());
        assertEquals(SqlFence.DEFAULT_TABLE, f.table());
        assertEquals(want.path("schema").asText(), f.schema());
        assertEquals(want.path("exclusive").asText(), f.statements().exclusive());
        assertEquals(want.path("shared").asText(), f.statements().shared());
        assertEquals(want.path("read_back").asText(), f.statements().readBack());
    }

    @ParameterizedTest
    @ValueSource(strings = {"a;drop table x", "1abc", "a.b.c", "a\n", "t'", "é",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})
    void refusesATableNameThatIsNotAnIdentifier(String bad) {
        assertThrows(IllegalArgumentException.class, () -> new SqlFence(SqlFence.Dialect.POSTGRES, bad));
    }

    @ParameterizedTest
    @ValueSource(strings = {"rl1:x:0:a", "", "rl1:y:1:a", "rl1:x:18446744073709551616:a", "rl1:x:1:"})
    void refusesAMalformedSequencerBeforeTouchingTheDatabase(String bad) {
        // No connection at all: the sequencer is refused before it is used.
        assertThrows(MalformedSequencerException.class, () -> new SqlFence(SqlFence.Dialect.MYSQL).check(null, bad));
    }
}
