package io.raftlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The client's main sources hold no {@code synchronized} (a method modifier
 * or a block): a thread blocked under a monitor pins a virtual thread's
 * carrier on JDK 21–23, so every wait is a j.u.c lock, a Condition or a
 * future. Comments, strings and character literals do not count.
 */
class NoSynchronizedTest {
    private static final Pattern KEYWORD = Pattern.compile("\\bsynchronized\\b");

    /** {@code src} with its comments, string literals (text blocks too) and character literals blanked, lines kept. */
    static String code(String src) {
        StringBuilder out = new StringBuilder(src.length());
        int i = 0;
        int n = src.length();
        while (i < n) {
            char c = src.charAt(i);
            if (src.startsWith("//", i)) {
                while (i < n && src.charAt(i) != '\n') {
                    i++;
                }
            } else if (src.startsWith("/*", i)) {
                int end = src.indexOf("*/", i + 2);
                end = end < 0 ? n : end + 2;
                blank(src, i, end, out);
                i = end;
            } else if (src.startsWith("\"\"\"", i)) {
                int end = src.indexOf("\"\"\"", i + 3);
                end = end < 0 ? n : end + 3;
                blank(src, i, end, out);
                i = end;
            } else if (c == '"' || c == '\'') {
                int j = i + 1;
                while (j < n && src.charAt(j) != c && src.charAt(j) != '\n') {
                    j += src.charAt(j) == '\\' ? 2 : 1;
                }
                int end = Math.min(j + 1, n);
                blank(src, i, end, out);
                i = end;
            } else {
                out.append(c);
                i++;
            }
        }
        return out.toString();
    }

    private static void blank(String src, int from, int to, StringBuilder out) {
        for (int k = from; k < to; k++) {
            out.append(src.charAt(k) == '\n' ? '\n' : ' ');
        }
    }

    /** "File:line" of each use of the keyword in {@code src}. */
    static List<String> uses(String file, String src) {
        List<String> out = new ArrayList<>();
        String code = code(src);
        Matcher m = KEYWORD.matcher(code);
        while (m.find()) {
            int line = 1;
            for (int k = 0; k < m.start(); k++) {
                line += code.charAt(k) == '\n' ? 1 : 0;
            }
            out.add(file + ":" + line);
        }
        return out;
    }

    @Test
    void theClientsMainSourcesHaveNoSynchronized() throws IOException {
        Path main = Path.of(System.getProperty("raftlock.mainSources", "src/main/java"));
        List<String> found = new ArrayList<>();
        int files;
        try (Stream<Path> s = Files.walk(main)) {
            List<Path> sources = s.filter(p -> p.toString().endsWith(".java")).sorted().collect(Collectors.toList());
            files = sources.size();
            for (Path p : sources) {
                found.addAll(uses(main.relativize(p).toString(), Files.readString(p, StandardCharsets.UTF_8)));
            }
        }
        assertFalse(files == 0, "no sources under " + main.toAbsolutePath());
        assertEquals(List.of(), found, "synchronized in the client's main sources (use a ReentrantLock)");
    }

    @Test
    void theGuardSeesAModifierAndABlockButNotCommentsOrStrings() {
        String src = "class A {\n"
                + "    // synchronized in a comment\n"
                + "    /* and synchronized\n       in a block comment */\n"
                + "    String s = \"synchronized\\\" still a string\";\n"
                + "    char c = '\\'';\n"
                + "    synchronized void m() {}\n"
                + "    void n() { synchronized (this) { } }\n"
                + "    int notsynchronized;\n"
                + "}\n";
        assertEquals(List.of("A.java:7", "A.java:8"), uses("A.java", src));
    }
}
