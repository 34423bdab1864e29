package io.raftlock.readme;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import javax.tools.Diagnostic;
import javax.tools.DiagnosticCollector;
import javax.tools.JavaCompiler;
import javax.tools.JavaFileObject;
import javax.tools.StandardJavaFileManager;
import javax.tools.ToolProvider;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * Every {@code java} block of clients/java/README.md, taken from the README
 * as it is: each must be a whole program (a public class with a main, in the
 * default package, so only the public API is reachable) that compiles with
 * {@code --release 17 -Xlint:all,-try -Werror} against the published modules
 * (-try: {@code try (Watch w = ...)} is how a watch is kept open), and
 * runs in a JVM of its own against the cluster of RAFTLOCK_ENDPOINTS (its
 * addresses as the program's arguments), ending with exit status 0 within
 * {@link #RUN_LIMIT_SECONDS}. Compiling needs no cluster; the runs are
 * skipped without one.
 */
class ReadmeExamplesTest {
    /** The longest one example may run. */
    static final long RUN_LIMIT_SECONDS = 120;

    private static final Pattern PUBLIC_CLASS = Pattern.compile("(?m)^public (?:final )?class (\\w+)");
    private static final Pattern MAIN = Pattern.compile("public static void main\\(String\\[\\] \\w+\\)");

    /** One ```java block: where it starts in the README (1-based line of its first code line), its class, its text. */
    record Block(int line, String className, String source) {
        @Override
        public String toString() {
            return className + " (README.md:" + line + ")";
        }
    }

    /** The java blocks of a markdown text, in order; an IllegalArgumentException names a block that is not a program. */
    static List<Block> blocks(String markdown) {
        List<Block> out = new ArrayList<>();
        String[] lines = markdown.split("\n", -1);
        for (int i = 0; i < lines.length; i++) {
            if (!lines[i].strip().equals("```java")) {
                continue;
            }
            int first = i + 1;
            StringBuilder b = new StringBuilder();
            int j = first;
            for (; j < lines.length && !lines[j].strip().equals("```"); j++) {
                b.append(lines[j]).append('\n');
            }
            if (j == lines.length) {
                throw new IllegalArgumentException("README.md:" + (first) + ": a java block with no closing fence");
            }
            String src = b.toString();
            Matcher m = PUBLIC_CLASS.matcher(src);
            if (!m.find()) {
                throw new IllegalArgumentException("README.md:" + (first + 1)
                        + ": a java block must be a whole program: a public class with a main");
            }
            if (!MAIN.matcher(src).find()) {
                throw new IllegalArgumentException("README.md:" + (first + 1) + ": class " + m.group(1)
                        + " has no public static void main(String[])");
            }
            out.add(new Block(first + 1, m.group(1), src));
            i = j;
        }
        return out;
    }

    private static Path readme() {
        return Path.of(System.getProperty("raftlock.readme", "../README.md"));
    }

    private static String classPath() {
        String cp = System.getProperty("surefire.test.class.path");
        return cp != null && !cp.isBlank() ? cp : System.getProperty("java.class.path");
    }

    /** Compiles the README's blocks into a fresh directory; the failure names each error's README line. */
    private static Path compileReadme(List<Block> blocks) throws IOException {
        Path dir = Files.createTempDirectory("raftlock-readme");
        Path src = Files.createDirectories(dir.resolve("src"));
        Path out = Files.createDirectories(dir.resolve("classes"));
        List<File> files = new ArrayList<>();
        Set<String> names = new HashSet<>();
        for (Block b : blocks) {
            assertTrue(names.add(b.className()), b + ": another block has the class " + b.className());
            Path f = src.resolve(b.className() + ".java");
            Files.writeString(f, b.source(), StandardCharsets.UTF_8);
            files.add(f.toFile());
        }
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        assertTrue(javac != null, "no system Java compiler: run the tests with a JDK");
        DiagnosticCollector<JavaFileObject> diags = new DiagnosticCollector<>();
        try (StandardJavaFileManager fm = javac.getStandardFileManager(diags, Locale.ROOT, StandardCharsets.UTF_8)) {
            List<String> options = List.of("--release", "17", "-Xlint:all,-try", "-Werror", "-proc:none",
                    "-cp", classPath(), "-d", out.toString());
            boolean ok = javac.getTask(null, fm, diags, options, null, fm.getJavaFileObjectsFromFiles(files)).call();
            StringBuilder msg = new StringBuilder();
            for (Diagnostic<? extends JavaFileObject> d : diags.getDiagnostics()) {
                msg.append(where(blocks, d)).append(": ").append(d.getKind()).append(": ")
                        .append(d.getMessage(Locale.ROOT)).append('\n');
            }
            if (!ok || msg.length() > 0) {
                fail("the README's examples do not compile cleanly:\n" + msg);
            }
        }
        return out;
    }

    private static String where(List<Block> blocks, Diagnostic<? extends JavaFileObject> d) {
        if (d.getSource() == null) {
            return "javac";
        }
        String file = Path.of(d.getSource().toUri()).getFileName().toString();
        for (Block b : blocks) {
            if (file.equals(b.className() + ".java")) {
                return "README.md:" + (b.line() + d.getLineNumber() - 1);
            }
        }
        return file + ":" + d.getLineNumber();
    }

    private static List<Block> readmeBlocks() throws IOException {
        List<Block> blocks = blocks(Files.readString(readme(), StandardCharsets.UTF_8));
        assertFalse(blocks.isEmpty(), readme() + " has no java block");
        return blocks;
    }

    @Test
    void everyJavaBlockIsAProgramThatCompiles() throws Exception {
        compileReadme(readmeBlocks());
    }

    @TestFactory
    Stream<DynamicTest> everyJavaBlockRunsAgainstTheCluster() throws Exception {
        String eps = System.getenv("RAFTLOCK_ENDPOINTS");
        assumeTrue(eps != null && !eps.isBlank(), "RAFTLOCK_ENDPOINTS is not set: no cluster");
        List<Block> blocks = readmeBlocks();
        Path classes = compileReadme(blocks);
        String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();
        return blocks.stream().map(b -> DynamicTest.dynamicTest(b.toString(), () -> run(java, classes, b, eps)));
    }

    private static void run(String java, Path classes, Block b, String eps) throws Exception {
        List<String> cmd = new ArrayList<>(List.of(java, "-cp", classes + File.pathSeparator + classPath(),
                b.className()));
        cmd.addAll(List.of(eps.split(",")));
        Path log = Files.createTempFile("raftlock-readme-" + b.className(), ".log");
        long t0 = System.nanoTime();
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile()).start();
        try {
            boolean ended = p.waitFor(RUN_LIMIT_SECONDS, TimeUnit.SECONDS);
            String output = Files.readString(log, StandardCharsets.UTF_8);
            System.out.printf("%s: %.2f s%n%s", b, (System.nanoTime() - t0) / 1e9, output.indent(4));
            assertTrue(ended, b + " did not end within " + RUN_LIMIT_SECONDS + " s; its output:\n" + output);
            assertEquals(0, p.exitValue(), b + " exited with " + p.exitValue() + "; its output:\n" + output);
        } finally {
            p.destroyForcibly();
            Files.deleteIfExists(log);
        }
    }

    @Test
    void aBlockThatIsNotAProgramIsNamedByItsLine() {
        String md = "# t\n\n```java\nint x = 1;\n```\n";
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> blocks(md));
        assertTrue(e.getMessage().startsWith("README.md:4: "), e.getMessage());
    }

    @Test
    void blocksAreFoundInOrderWithTheirLines() {
        String md = "x\n```java\npublic class A {\n    public static void main(String[] a) {}\n}\n```\n"
                + "```sh\nls\n```\n```java\npublic class B {\n    public static void main(String[] args) {}\n}\n```\n";
        List<Block> bs = blocks(md);
        assertEquals(2, bs.size());
        assertEquals("A", bs.get(0).className());
        assertEquals(3, bs.get(0).line());
        assertEquals("B", bs.get(1).className());
        assertEquals(11, bs.get(1).line());
    }
}
