package io.mrd.cli.secondaries;

import io.mrd.cli.fixture.DaemonExtension;
import io.mrd.cli.fixture.LiveDaemon;
import io.mrd.layout.MrdCounter;
import io.mrd.testing.ChildJvm;
import io.mrd.tools.ControlFileSnapshot;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;

import java.io.IOException;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * docs/buffers.md's Netty example: {@link NettyReadmeExample} moves a message through a LocalChannel pair in
 * registered buffers of a real daemon and prints the keys the server side read, and docs/buffers.md shows exactly
 * its code.
 */
final class NettyReadmeExampleTest
{
    static final String SOURCE = "cli/src/test/java/io/mrd/cli/secondaries/NettyReadmeExample.java";
    static final String README_BEGIN = "<!-- example:NettyReadmeExample -->";
    private static final Pattern OUTPUT =
        Pattern.compile("read 23 bytes at 0x([0-9a-f]+) lkey 0x([0-9a-f]+) rkey 0x([0-9a-f]+)");

    @RegisterExtension
    final DaemonExtension daemons = new DaemonExtension();

    @Test
    void exampleReadsRegisteredBuffersWithTheirKeys()
    {
        final LiveDaemon daemon = daemons.start("netty-readme", "--max-memory", "128MiB");
        final String output;
        try (ChildJvm example = ChildJvm.start("netty-readme-example", NettyReadmeExample.class,
            List.of(daemon.dir().toString())))
        {
            final int exit = example.awaitExit(LiveDaemon.TIMEOUT);
            output = example.output();
            assertEquals(0, exit, output);
        }
        final Matcher matcher = OUTPUT.matcher(output);
        assertTrue(matcher.find(), "the example prints what it read and its keys:\n" + output);
        final long address = Long.parseUnsignedLong(matcher.group(1), 16);
        assertTrue(address >= daemon.baseVirtaddr() && address < daemon.baseVirtaddr() + (128L << 20),
            "the buffer is the daemon's memory: 0x" + matcher.group(1));
        assertNotEquals("0", matcher.group(3), "REMOTE_WRITE: an rkey");
        final ControlFileSnapshot s = daemon.awaitSnapshot("the example's pool to be freed", snapshot ->
            snapshot.counter(MrdCounter.BYTES_ALLOCATED) == 0 && snapshot.mrs().isEmpty());
        assertEquals(s.counter(MrdCounter.ALLOCS), s.counter(MrdCounter.FREES),
            "the pool gave back every slab itself");
    }

    @Test
    void theBufferPoolDocumentShowsTheExampleVerbatim() throws IOException
    {
        ReadmeExampleTest.assertDocumentShows("docs/buffers.md", SOURCE, README_BEGIN);
    }
}
