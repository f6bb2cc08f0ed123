package io.mrd.primary.journal;

import io.mrd.layout.journal.JournalEvent;
import io.mrd.layout.journal.JournalEventType;
import io.mrd.testing.TestDirs;
import io.mrd.tools.JournalReader;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Four threads of their own appending at once, as the daemon's workers, event loop and reclaim thread do, while
 * a fifth reads as {@code mrd events --follow} does: every event is read back exactly once, whole (each field
 * derived from the thread and its sequence number, so that a record mixing two appends shows), each thread's in
 * the order it appended them; and a reader that starts after the writers ends reads the same.
 */
final class JournalConcurrencyTest
{
    private static final int THREADS = 4;
    private static final int PER_THREAD = 25_000;
    /** Holds every event (four files of 4 MiB, 65,535 records each) while still rolling over three laps. */
    private static final long JOURNAL_SIZE = 16L << 20;

    private final Path dir = TestDirs.create("journal-threads");

    @AfterEach
    void removeDir()
    {
        TestDirs.deleteTree(dir);
    }

    @Test
    void concurrentAppendsAreEachReadOnceAndWhole() throws Exception
    {
        final MappedEventJournal journal = MappedEventJournal.create(dir, JOURNAL_SIZE, 11);
        final CountDownLatch go = new CountDownLatch(1);
        final AtomicReference<Throwable> failure = new AtomicReference<>();
        final List<Thread> writers = new ArrayList<>();
        for (int t = 1; t <= THREADS; t++)
        {
            final int thread = t;
            writers.add(Thread.ofPlatform().name("journal-writer-" + t).start(() ->
            {
                try
                {
                    go.await();
                    for (int i = 0; i < PER_THREAD; i++)
                    {
                        journal.append(JournalEventType.MR_CREATED, thread, thread, i, address(thread, i),
                            length(thread, i), (int)address(thread, i), thread * 31 + i, (long)thread << 32 | i);
                    }
                }
                catch (final Throwable ex)
                {
                    failure.compareAndSet(null, ex);
                }
            }));
        }
        final List<JournalEvent> followed = new ArrayList<>();
        final AtomicBoolean writing = new AtomicBoolean(true);
        final long[] lostWhileFollowing = new long[1];
        final Thread follower = Thread.ofPlatform().name("journal-follower").start(() ->
        {
            try (JournalReader reader = JournalReader.open(dir))
            {
                while (writing.get())
                {
                    reader.poll(followed::add);
                    Thread.onSpinWait();
                }
                reader.poll(followed::add);
                lostWhileFollowing[0] = reader.lostLaps();
            }
            catch (final Throwable ex)
            {
                failure.compareAndSet(null, ex);
            }
        });
        go.countDown();
        for (final Thread writer : writers)
        {
            writer.join(TimeUnit.MINUTES.toMillis(2));
            assertTrue(!writer.isAlive(), writer.getName() + " did not finish");
        }
        writing.set(false);
        follower.join(TimeUnit.MINUTES.toMillis(2));
        assertTrue(!follower.isAlive(), "the follower did not finish");
        journal.close();
        if (null != failure.get())
        {
            throw new AssertionError("a thread failed", failure.get());
        }

        assertEquals(0, lostWhileFollowing[0], "the journal holds every event: the follower loses none");
        assertEachOnceAndWhole(followed, "the follower");
        final List<JournalEvent> after = JournalCodecTest.readAll(dir);
        assertEachOnceAndWhole(after, "a reader after the writers");
        assertEquals(followed, after, "the follower and the reader after read the same");
    }

    private static void assertEachOnceAndWhole(final List<JournalEvent> events, final String who)
    {
        assertEquals(THREADS * PER_THREAD, events.size(), who + ": events read");
        final int[] next = new int[THREADS + 1];
        for (final JournalEvent e : events)
        {
            final int thread = e.client();
            assertTrue(thread >= 1 && thread <= THREADS, who + ": client " + thread + " in " + e);
            final int i = e.arg();
            assertEquals(next[thread], i, who + ": thread " + thread + "'s next event (a gap, a repeat or a " +
                "reordering): " + e);
            next[thread]++;
            assertEquals(JournalEventType.MR_CREATED, e.type(), who + ": " + e);
            assertEquals(thread, e.flags(), who + ": flags of " + e);
            assertEquals(address(thread, i), e.address(), who + ": address of " + e);
            assertEquals(length(thread, i), e.length(), who + ": length of " + e);
            assertEquals((int)address(thread, i), e.lkey(), who + ": lkey of " + e);
            assertEquals(thread * 31 + i, e.rkey(), who + ": rkey of " + e);
            assertEquals((long)thread << 32 | i, e.value(), who + ": value of " + e);
        }
    }

    private static long address(final int thread, final int i)
    {
        return ((long)thread << 40) + ((long)i << 21) + 0x1234;
    }

    private static long length(final int thread, final int i)
    {
        return ~address(thread, i) * 0x9E37_79B9L;
    }
}
