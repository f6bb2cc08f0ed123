package io.mrd.layout;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestReporter;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static io.mrd.layout.SeqLock.WRITE_IN_PROGRESS;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The seqlock: a step-by-step interleaving that proves validation catches a torn read, then a concurrent
 * stress run with one writer and several readers, bounded by iteration counts.
 */
final class SeqLockTest
{
    private static final int SEQ_OFFSET = 0;
    /** Four copies of the version, then a checksum: a value that is torn is visibly torn. */
    private static final int VALUE_OFFSET = 64;
    private static final int FIELDS = 4;
    private static final int CHECKSUM_OFFSET = VALUE_OFFSET + FIELDS * Long.BYTES;
    private static final long CHECKSUM_SALT = 0x9E3779B97F4A7C15L;

    private static final int STRESS_WRITES = 2_000_000;
    private static final int BROKEN_STRESS_WRITES = 500_000;
    private static final int READERS = 3;
    private static final long DEADLINE_NS = TimeUnit.SECONDS.toNanos(60);

    private final UnsafeBuffer buffer = new UnsafeBuffer(ByteBuffer.allocateDirect(256));
    private final SeqLock lock = new SeqLock(buffer, SEQ_OFFSET);

    SeqLockTest()
    {
        buffer.verifyAlignment();
    }

    @Test
    void validationCatchesAWriteBetweenTwoHalvesOfARead()
    {
        write(1);

        // Broken reader: no validation, sees half of version 1 and half of version 2.
        final long[] broken = new long[FIELDS];
        lock.tryBeginRead();
        broken[0] = field(0);
        broken[1] = field(1);
        write(2);
        broken[2] = field(2);
        broken[3] = field(3);
        assertNotEquals(broken[0], broken[3], "the broken reader's value must be torn");
        assertEquals(1, broken[0]);
        assertEquals(2, broken[3]);

        // Correct reader, same interleaving: validation fails, the retry is consistent.
        final long[] value = new long[FIELDS];
        final long seq = lock.tryBeginRead();
        assertNotEquals(WRITE_IN_PROGRESS, seq);
        value[0] = field(0);
        value[1] = field(1);
        write(3);
        value[2] = field(2);
        value[3] = field(3);
        assertNotEquals(value[0], value[3]);
        assertFalse(lock.validate(seq), "validate must catch the write in between");

        final long retry = lock.tryBeginRead();
        assertNotEquals(WRITE_IN_PROGRESS, retry);
        for (int i = 0; i < FIELDS; i++)
        {
            value[i] = field(i);
        }
        assertTrue(lock.validate(retry));
        for (int i = 0; i < FIELDS; i++)
        {
            assertEquals(3, value[i]);
        }
    }

    @Test
    void readerThatBeganBeforeAnUnfinishedWriteFailsValidation()
    {
        write(1);
        final long seq = lock.tryBeginRead();
        lock.beginWrite();
        assertFalse(lock.validate(seq));
        lock.endWrite();
        assertFalse(lock.validate(seq));
    }

    @Test
    void readerThatBeginsInsideAWriteIsToldSo()
    {
        write(1);
        lock.beginWrite();
        assertEquals(1, lock.sequence() & 1, "odd while a write is in progress");
        assertEquals(WRITE_IN_PROGRESS, lock.tryBeginRead());
        lock.endWrite();
        assertEquals(0, lock.sequence() & 1, "even once the write ended");
        final long seq = lock.tryBeginRead();
        assertNotEquals(WRITE_IN_PROGRESS, seq);
        assertTrue(lock.validate(seq));
    }

    @Test
    void eachWriteMovesTheSequenceByTwo()
    {
        final long start = lock.sequence();
        assertEquals(0, start);
        final long seq = lock.tryBeginRead();
        assertTrue(lock.validate(seq));
        write(1);
        write(2);
        assertEquals(start + 4, lock.sequence());
        assertEquals(start + 4, lock.tryBeginRead());
    }

    @Test
    void aSecondBeginWriteIsRefused()
    {
        lock.beginWrite();
        assertThrows(IllegalStateException.class, lock::beginWrite);
        lock.endWrite();
        lock.beginWrite();
        lock.endWrite();
        assertEquals(4, lock.sequence());
    }

    @Test
    void concurrentReadersNeverValidateATornValue(final TestReporter reporter) throws InterruptedException
    {
        final Writer writer = new Writer(STRESS_WRITES);
        final List<Reader> readers = new ArrayList<>();
        for (int i = 0; i < READERS; i++)
        {
            readers.add(new Reader(writer, true));
        }
        final Result result = run(writer, readers);

        final StringBuilder report = new StringBuilder("writes " + STRESS_WRITES);
        for (final Reader reader : readers)
        {
            assertNull(reader.failure, reader.failure);
            assertTrue(reader.validatedReads > 0, "a reader validated nothing");
            report.append(", reader: ").append(reader.validatedReads).append(" validated, ")
                .append(reader.failedValidations).append(" failed validations, ")
                .append(reader.writeInProgress).append(" write-in-progress");
        }
        assertEquals(2L * STRESS_WRITES + 2, lock.sequence(), report.toString());
        reporter.publishEntry("seqlock stress", report + " in " + result.elapsedMs + " ms");
        System.out.println("seqlock stress: " + report + " in " + result.elapsedMs + " ms");
    }

    @Test
    void brokenReadersMaySeeTornValues(final TestReporter reporter) throws InterruptedException
    {
        final Writer writer = new Writer(BROKEN_STRESS_WRITES);
        final List<Reader> readers = new ArrayList<>();
        for (int i = 0; i < READERS; i++)
        {
            readers.add(new Reader(writer, false));
        }
        final Result result = run(writer, readers);

        // Whether a torn value shows depends on scheduling: reported, never asserted.
        long reads = 0;
        long torn = 0;
        for (final Reader reader : readers)
        {
            assertNull(reader.failure, reader.failure);
            reads += reader.validatedReads;
            torn += reader.tornReads;
        }
        final String report = "writes " + BROKEN_STRESS_WRITES + ", unvalidated reads " + reads + ", torn " + torn +
            " in " + result.elapsedMs + " ms";
        reporter.publishEntry("seqlock broken readers", report);
        System.out.println("seqlock broken readers: " + report);
    }

    private Result run(final Writer writer, final List<Reader> readers) throws InterruptedException
    {
        write(0);
        final long startNs = System.nanoTime();
        final List<Thread> threads = new ArrayList<>();
        final AtomicReference<Throwable> uncaught = new AtomicReference<>();
        for (final Reader reader : readers)
        {
            threads.add(Thread.ofPlatform().daemon().name("seqlock-reader").unstarted(reader));
        }
        threads.add(Thread.ofPlatform().daemon().name("seqlock-writer").unstarted(writer));
        for (final Thread thread : threads)
        {
            thread.setUncaughtExceptionHandler((t, ex) -> uncaught.compareAndSet(null, ex));
            thread.start();
        }
        for (final Thread thread : threads)
        {
            final long remainingMs = TimeUnit.NANOSECONDS.toMillis(startNs + DEADLINE_NS + 1_000_000_000L -
                System.nanoTime());
            thread.join(Math.max(1, remainingMs));
            assertFalse(thread.isAlive(), thread.getName() + " did not finish within the deadline");
        }
        assertNull(uncaught.get(), String.valueOf(uncaught.get()));
        assertTrue(writer.done, "the writer hit the deadline after " + writer.written + " writes");
        return new Result(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNs));
    }

    private record Result(long elapsedMs)
    {
    }

    private final class Writer implements Runnable
    {
        private final int writes;
        private volatile boolean done;
        private volatile boolean finished;
        private int written;

        private Writer(final int writes)
        {
            this.writes = writes;
        }

        public void run()
        {
            try
            {
                final long deadline = System.nanoTime() + DEADLINE_NS;
                for (int i = 1; i <= writes; i++)
                {
                    write(i);
                    written = i;
                    if ((i & 0xFFFF) == 0 && System.nanoTime() > deadline)
                    {
                        break;
                    }
                }
                done = written == writes;
            }
            finally
            {
                // Readers stop on this even when the writer failed.
                finished = true;
            }
        }
    }

    private final class Reader implements Runnable
    {
        private final Writer writer;
        private final boolean validating;
        private final long[] value = new long[FIELDS];
        private long validatedReads;
        private long failedValidations;
        private long writeInProgress;
        private long tornReads;
        private volatile String failure;

        private Reader(final Writer writer, final boolean validating)
        {
            this.writer = writer;
            this.validating = validating;
        }

        public void run()
        {
            final long deadline = System.nanoTime() + DEADLINE_NS;
            long lastVersion = -1;
            boolean last = false;
            while (!last)
            {
                // One more read after the writer finished, so every reader sees the final value.
                last = writer.finished;
                if (System.nanoTime() > deadline)
                {
                    failure = "reader hit the deadline";
                    return;
                }
                final long checksum = validating ? readValidated(deadline) : readUnvalidated();
                if (checksum == Long.MIN_VALUE)
                {
                    return;
                }
                final boolean consistent = consistent(value, checksum);
                if (validating)
                {
                    if (!consistent)
                    {
                        failure = "validated a torn value " + Arrays.toString(value) + " checksum " +
                            Long.toHexString(checksum);
                        return;
                    }
                    if (value[0] < lastVersion)
                    {
                        failure = "version went back from " + lastVersion + " to " + value[0];
                        return;
                    }
                    lastVersion = value[0];
                }
                else if (!consistent)
                {
                    tornReads++;
                }
                validatedReads++;
            }
            if (validating && lastVersion != writer.writes)
            {
                failure = "last read saw version " + lastVersion + ", not " + writer.writes;
            }
        }

        /**
         * @return the checksum read with the value, or Long.MIN_VALUE at the deadline.
         */
        private long readValidated(final long deadline)
        {
            for (long attempt = 0; ; attempt++)
            {
                final long seq = lock.tryBeginRead();
                if (seq == WRITE_IN_PROGRESS)
                {
                    writeInProgress++;
                    backOff(attempt);
                }
                else
                {
                    for (int i = 0; i < FIELDS; i++)
                    {
                        value[i] = field(i);
                    }
                    final long checksum = buffer.getLong(CHECKSUM_OFFSET);
                    if (lock.validate(seq))
                    {
                        return checksum;
                    }
                    failedValidations++;
                }
                if ((attempt & 0x3FF) == 0x3FF && System.nanoTime() > deadline)
                {
                    failure = "reader hit the deadline retrying one read";
                    return Long.MIN_VALUE;
                }
            }
        }

        private long readUnvalidated()
        {
            for (int i = 0; i < FIELDS; i++)
            {
                value[i] = field(i);
            }
            return buffer.getLong(CHECKSUM_OFFSET);
        }

        private static void backOff(final long attempt)
        {
            // Two cores, four threads: let a descheduled writer run instead of spinning against it.
            if ((attempt & 0x3F) == 0x3F)
            {
                Thread.yield();
            }
            else
            {
                Thread.onSpinWait();
            }
        }
    }

    private static boolean consistent(final long[] value, final long checksum)
    {
        for (int i = 1; i < FIELDS; i++)
        {
            if (value[i] != value[0])
            {
                return false;
            }
        }
        return checksum == checksum(value[0]);
    }

    private static long checksum(final long version)
    {
        return Long.rotateLeft(version * CHECKSUM_SALT, 17) ^ CHECKSUM_SALT;
    }

    private void write(final long version)
    {
        lock.beginWrite();
        for (int i = 0; i < FIELDS; i++)
        {
            buffer.putLong(VALUE_OFFSET + i * Long.BYTES, version);
        }
        buffer.putLong(CHECKSUM_OFFSET, checksum(version));
        lock.endWrite();
    }

    private long field(final int index)
    {
        return buffer.getLong(VALUE_OFFSET + index * Long.BYTES);
    }
}
