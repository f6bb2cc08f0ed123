package io.mrd.cli.secondaries;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.cli.ProjectRoot;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.sys.Sizes;
import io.mrd.testing.ChildJvm;
import io.mrd.tools.ControlFileSnapshot;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * README.md's "Using mrd from a JVM worker" example, {@code examples/}' ReadmeExample: it runs against a real
 * daemon, the README shows exactly its code, and {@code examples/pom.xml} depends on this version of mrd, so
 * that the three cannot drift apart.
 */
final class ReadmeExampleTest
{
    static final String SOURCE = "examples/src/main/java/com/example/ReadmeExample.java";
    private static final String EXAMPLES_POM = "examples/pom.xml";
    static final String BEGIN = "// README-BEGIN";
    static final String END = "// README-END";
    static final String README_BEGIN = "<!-- example:ReadmeExample -->";
    static final String README_END = "<!-- /example -->";
    private static final Pattern OUTPUT = Pattern.compile("buffer 0x([0-9a-f]+) lkey 0x([0-9a-f]+)");

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    @Test
    void exampleRunsAgainstARealDaemon()
    {
        final LiveDaemon daemon = daemons.start("readme", "--max-memory", "128MiB");
        final String output;
        // The one copy of the example is examples/' (a project of its own, outside this build): java's
        // source-file mode compiles it against this class path, as examples/run does against the installed jars.
        final String source = ProjectRoot.path().resolve(SOURCE).toString();
        try (ChildJvm example = ChildJvm.start("readme-example", source, List.of(daemon.dir().toString()), Map.of(),
            List.of()))
        {
            final int exit = example.awaitExit(LiveDaemon.TIMEOUT);
            output = example.output();
            assertEquals(0, exit, output);
        }
        final Matcher matcher = OUTPUT.matcher(output);
        assertTrue(matcher.find(), "the example prints its buffer and lkey:\n" + output);
        final long address = Long.parseUnsignedLong(matcher.group(1), 16);
        final ControlFileSnapshot s = daemon.awaitSnapshot("the example's memory to be freed", snapshot ->
            snapshot.counter(MrdCounter.BYTES_ALLOCATED) == 0 && snapshot.mrs().isEmpty());
        assertEquals(daemon.baseVirtaddr() + 4096, address, "the first allocation starts at --base-virtaddr");
        assertEquals(1L, s.counter(MrdCounter.MRS_CREATED), "its lookup registered one MR");
        assertEquals(1L, s.counter(MrdCounter.MRS_DEREGISTERED), "its free deregistered it");
        assertEquals(1L, s.counter(MrdCounter.FREES), "it freed its memory itself: " + Sizes.hex(address));
    }

    @Test
    void readmeShowsTheExampleVerbatim() throws IOException
    {
        assertReadmeShows(SOURCE, README_BEGIN);
    }

    @Test
    void examplesDependOnThisVersion() throws IOException
    {
        final Path root = ProjectRoot.path();
        final String project = firstGroup(root.resolve("pom.xml"),
            "<artifactId>mrd-parent</artifactId>\\s*<version>([^<]+)</version>");
        final String examples = firstGroup(root.resolve(EXAMPLES_POM), "<mrd\\.version>([^<]+)</mrd\\.version>");
        assertEquals(project, examples, EXAMPLES_POM + ": <mrd.version> must be pom.xml's version " + project +
            " (what scripts/install installs)");
    }

    private static String firstGroup(final Path file, final String regex) throws IOException
    {
        final Matcher matcher = Pattern.compile(regex).matcher(Files.readString(file, StandardCharsets.UTF_8));
        assertTrue(matcher.find(), file + " has no " + regex);
        return matcher.group(1);
    }

    /**
     * Asserts that README.md shows the code of {@code source} between {@link #BEGIN} and {@link #END} verbatim,
     * as one java block after the line {@code readmeBegin} (and before {@link #README_END}).
     */
    static void assertReadmeShows(final String source, final String readmeBegin) throws IOException
    {
        assertDocumentShows("README.md", source, readmeBegin);
    }

    /**
     * As {@link #assertReadmeShows}, for another Markdown file of the project ({@code docs/buffers.md}).
     */
    static void assertDocumentShows(final String document, final String source, final String begin)
        throws IOException
    {
        final Path root = ProjectRoot.path();
        final List<String> code = between(Files.readAllLines(root.resolve(source), StandardCharsets.UTF_8), BEGIN, END,
            source);
        final List<String> block = between(Files.readAllLines(root.resolve(document), StandardCharsets.UTF_8),
            begin, README_END, document);
        assertTrue(block.size() >= 2 && block.getFirst().equals("```java") && block.getLast().equals("```"),
            document + ": the example between " + begin + " and " + README_END + " must be one ```java block");
        final List<String> shown = block.subList(1, block.size() - 1);
        assertEquals(String.join("\n", code), String.join("\n", shown),
            document + " must show " + source + " between " + BEGIN + " and " + END + " verbatim; paste it again");
    }

    /**
     * @return the lines strictly between the marker lines, trailing blanks removed.
     */
    static List<String> between(final List<String> lines, final String begin, final String end, final String file)
    {
        final int from = indexOf(lines, begin, 0, file);
        final int to = indexOf(lines, end, from + 1, file);
        final List<String> result = new ArrayList<>();
        for (final String line : lines.subList(from + 1, to))
        {
            result.add(line.stripTrailing());
        }
        return result;
    }

    private static int indexOf(final List<String> lines, final String marker, final int from, final String file)
    {
        for (int i = from; i < lines.size(); i++)
        {
            if (lines.get(i).strip().equals(marker))
            {
                return i;
            }
        }
        throw new AssertionError(file + " has no line '" + marker + "'");
    }
}
