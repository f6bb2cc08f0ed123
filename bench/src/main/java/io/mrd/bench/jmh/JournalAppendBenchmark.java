package io.mrd.bench.jmh;

import io.mrd.bench.fixture.GlobalCacheFixture;
import io.mrd.layout.journal.JournalEventType;
import io.mrd.primary.journal.MappedEventJournal;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Group;
import org.openjdk.jmh.annotations.GroupThreads;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.stream.Stream;

/**
 * The cost of one event in the daemon's journal: {@link MappedEventJournal#append} of an MR_CREATED-sized record
 * (every field set) into a journal of the default 64 MiB on tmpfs ({@code mrd.bench.tmp}, default /dev/shm), as
 * the daemon's run directory is; the roll to the next file happens every 262,143 events, inside the measurement,
 * as it does in the daemon. {@code journalappend}: one thread; {@code journalappend2}: two threads appending at
 * once, the time per event as each thread sees it (the lock's hand-over included).
 */
@State(Scope.Benchmark)
public class JournalAppendBenchmark
{
    private static final long JOURNAL_SIZE = 64L << 20;

    private Path dir;
    private MappedEventJournal journal;

    /** Each thread's own counter: a shared one would add its cache-line traffic to the lock's. */
    @State(Scope.Thread)
    public static class Sequence
    {
        long next;
    }

    @Setup(Level.Trial)
    public void setUp() throws IOException
    {
        dir = Files.createTempDirectory(GlobalCacheFixture.baseDirectory(), "mrd-bench-journal-");
        journal = MappedEventJournal.create(dir.resolve("journal"), JOURNAL_SIZE, 1);
    }

    @TearDown(Level.Trial)
    public void tearDown()
    {
        journal.close();
        try (Stream<Path> files = Files.walk(dir))
        {
            for (final Path file : files.sorted(Comparator.reverseOrder()).toList())
            {
                Files.deleteIfExists(file);
            }
        }
        catch (final IOException ex)
        {
            throw new UncheckedIOException(ex);
        }
    }

    @Benchmark
    public void journalappend(final Sequence sequence)
    {
        append(sequence.next++);
    }

    @Benchmark
    @Group("journalappend2")
    @GroupThreads(1)
    public void first(final Sequence sequence)
    {
        append(sequence.next++);
    }

    @Benchmark
    @Group("journalappend2")
    @GroupThreads(1)
    public void second(final Sequence sequence)
    {
        append(sequence.next++ | 1L << 40);
    }

    private void append(final long i)
    {
        journal.append(JournalEventType.MR_CREATED, 0, 3, (int)i & 0xFFFF, 0x7f00_0000_0000L + (i << 21), 2 << 20,
            (int)i, (int)(i >>> 1), 0);
    }
}
