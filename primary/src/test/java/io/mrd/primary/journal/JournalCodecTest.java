package io.mrd.primary.journal;

import io.mrd.layout.journal.JournalEvent;
import io.mrd.layout.journal.JournalEventType;
import io.mrd.layout.journal.JournalFileDescriptor;
import io.mrd.layout.journal.JournalRecordDescriptor;
import io.mrd.testing.TestDirs;
import io.mrd.primary.provider.Registration;
import io.mrd.tools.JournalReader;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;

import static io.mrd.layout.journal.JournalRecordDescriptor.RECORD_LENGTH;
import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * The record codec: what {@link MappedEventJournal} writes, {@link JournalReader} reads back, field for field and
 * in order; a last record torn anywhere (cut at any byte, its commit word missing, or left over from an older
 * lap) is where the journal ends, never an event.
 */
final class JournalCodecTest
{
    /** One event as a hook gives it: everything but the time, which the journal's clock sets. */
    record Given(JournalEventType type, int flags, int client, int arg, long address, long length, int lkey,
        int rkey, long value)
    {
        void appendTo(final EventJournal journal)
        {
            journal.append(type, flags, client, arg, address, length, lkey, rkey, value);
        }

        static Given of(final JournalEvent event)
        {
            return new Given(event.type(), event.flags(), event.client(), event.arg(), event.address(),
                event.length(), event.lkey(), event.rkey(), event.value());
        }
    }

    @Property(tries = 60)
    void anySequenceOfEventsRoundTrips(@ForAll("events") @Size(max = 300) final List<Given> events)
    {
        final Path dir = TestDirs.create("journal-codec");
        try
        {
            final long[] clock = {1_000};
            final MappedEventJournal journal = MappedEventJournal.create(dir, 1 << 20, 42, () -> clock[0]++);
            events.forEach(e -> e.appendTo(journal));
            journal.close();
            final List<JournalEvent> read = readAll(dir);
            assertEquals(events, read.stream().map(Given::of).toList());
            for (int i = 0; i < read.size(); i++)
            {
                assertEquals(1_001 + i, read.get(i).timeNs(), "the time of event " + i + " (the lap took 1000)");
            }
        }
        finally
        {
            TestDirs.deleteTree(dir);
        }
    }

    /**
     * The last record keeps its first {@code cut} bytes and has zeros after them, as when the daemon died while
     * storing it (zeros: what a fresh file holds; its value's top byte is set so that every cut changes it).
     */
    @Property(tries = 40)
    void aRecordCutAtAnyByteEndsTheJournal(
        @ForAll("events") @Size(min = 1, max = 40) final List<Given> events,
        @ForAll @IntRange(min = 0, max = RECORD_LENGTH - 1) final int cut) throws IOException
    {
        final List<Given> written = new ArrayList<>(events);
        final Given last = written.removeLast();
        written.add(new Given(last.type(), last.flags(), last.client(), last.arg(), last.address(), last.length(),
            last.lkey(), last.rkey(), last.value() | 0x8000_0000_0000_0000L));
        final Path dir = TestDirs.create("journal-torn");
        try
        {
            write(dir, written);
            final long at = JournalFileDescriptor.RECORDS_OFFSET + (long)(written.size() - 1) * RECORD_LENGTH;
            overwrite(dir, at + cut, new byte[RECORD_LENGTH - cut]);
            assertEquals(written.subList(0, written.size() - 1), readAll(dir).stream().map(Given::of).toList(),
                "a record cut after byte " + cut);
        }
        finally
        {
            TestDirs.deleteTree(dir);
        }
    }

    /**
     * A record has room for one pair of keys: an MR on several devices is its MR_CREATED with device 0's, then one
     * MR_DEVICE_KEYS per further device, in device order; an MR on one device is its MR_CREATED alone, as before.
     */
    @Test
    void anMrOnSeveralDevicesIsItsCreationThenEachFurtherDevicesKeys()
    {
        final List<Given> appended = new ArrayList<>();
        final EventJournal journal = (type, flags, client, arg, address, length, lkey, rkey, value) ->
            appended.add(new Given(type, flags, client, arg, address, length, lkey, rkey, value));
        final long address = 0x1000_0000_0000L;
        final long length = 2 << 20;
        journal.mrCreated(3, 7, new Registration(address, length, 0x101, 0x101, 9, 4, List.of(
            new Registration.DeviceMr(0x0400_0101, 0x0400_0102, 10, 5),
            new Registration.DeviceMr(0x0800_0101, 0x0800_0102, 11, 6))), 0);
        assertEquals(List.of(
            new Given(JournalEventType.MR_CREATED, 0, 3, 7, address, length, 0x101, 0x101, 0),
            new Given(JournalEventType.MR_DEVICE_KEYS, 0, 3, 7, address, length, 0x0400_0101, 0x0400_0102, 1),
            new Given(JournalEventType.MR_DEVICE_KEYS, 0, 3, 7, address, length, 0x0800_0101, 0x0800_0102, 2)),
            appended);

        appended.clear();
        journal.mrCreated(3, 8, new Registration(address, length, 0x201, 0, 12, 7), 0);
        assertEquals(List.of(new Given(JournalEventType.MR_CREATED, 0, 3, 8, address, length, 0x201, 0, 0)),
            appended);
    }

    @Test
    void aRecordWithoutItsCommitWordEndsTheJournal() throws IOException
    {
        final Path dir = TestDirs.create("journal-uncommitted");
        try
        {
            final List<Given> written = List.of(
                new Given(JournalEventType.ALLOC, 1, 3, 0, 0x1000_0000_0000L, 2 << 20, 0, 0, 0),
                new Given(JournalEventType.MR_CREATED, 0, 3, 7, 0x1000_0000_0000L, 2 << 20, 0x11, 0x22, 0));
            write(dir, written);
            overwrite(dir, JournalFileDescriptor.RECORDS_OFFSET + RECORD_LENGTH, new byte[Long.BYTES]);
            assertEquals(written.subList(0, 1), readAll(dir).stream().map(Given::of).toList());
        }
        finally
        {
            TestDirs.deleteTree(dir);
        }
    }

    /**
     * The journal in one file is cut and the record after the cut is one of an older lap, complete and checksummed
     * for that lap: a file reused for a new lap is not cleared, so this is what a reader finds past its end.
     */
    @Test
    void aRecordOfAnOlderLapEndsTheJournal() throws IOException
    {
        final Path dir = TestDirs.create("journal-stale");
        try
        {
            final List<Given> written = new ArrayList<>();
            for (int i = 0; i < 3; i++)
            {
                written.add(new Given(JournalEventType.FREE, 0, 5, 0, 0x2000_0000L * (i + 1), 4096, 0, 0, i));
            }
            write(dir, written);
            final Path file = dir.resolve(JournalFileDescriptor.fileName(0));
            final long at = JournalFileDescriptor.RECORDS_OFFSET + 2L * RECORD_LENGTH;
            final long w8 = readLong(file, at + 8);
            // The third record as the lap before would have committed it.
            final long stale = JournalRecordDescriptor.commitWord(0, w8, readLong(file, at + 16),
                readLong(file, at + 24), readLong(file, at + 32), readLong(file, at + 40), readLong(file, at + 48),
                readLong(file, at + 56));
            overwrite(dir, at, ByteBuffer.allocate(8).order(java.nio.ByteOrder.LITTLE_ENDIAN).putLong(stale).array());
            assertEquals(written.subList(0, 2), readAll(dir).stream().map(Given::of).toList());
        }
        finally
        {
            TestDirs.deleteTree(dir);
        }
    }

    @Provide
    Arbitrary<List<Given>> events()
    {
        return Combinators.combine(
            Arbitraries.of(JournalEventType.class),
            Arbitraries.integers().between(0, 0xFFFF),
            Arbitraries.integers(),
            Arbitraries.integers(),
            Arbitraries.longs(),
            Arbitraries.longs(),
            Arbitraries.integers(),
            Arbitraries.integers())
            .flatAs((type, flags, client, arg, address, length, lkey, rkey) -> Arbitraries.longs()
                .map(value -> new Given(type, flags, client, arg, address, length, lkey, rkey, value)))
            .list();
    }

    static void write(final Path dir, final List<Given> events)
    {
        final MappedEventJournal journal = MappedEventJournal.create(dir, 1 << 20, 42);
        events.forEach(e -> e.appendTo(journal));
        journal.close();
    }

    static List<JournalEvent> readAll(final Path dir)
    {
        final List<JournalEvent> read = new ArrayList<>();
        try (JournalReader reader = JournalReader.open(dir))
        {
            reader.poll(read::add);
        }
        return read;
    }

    private static void overwrite(final Path dir, final long at, final byte[] bytes) throws IOException
    {
        try (FileChannel channel = FileChannel.open(dir.resolve(JournalFileDescriptor.fileName(0)),
            StandardOpenOption.WRITE))
        {
            channel.write(ByteBuffer.wrap(bytes), at);
        }
    }

    private static long readLong(final Path file, final long at) throws IOException
    {
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ))
        {
            final ByteBuffer buffer = ByteBuffer.allocate(8).order(java.nio.ByteOrder.LITTLE_ENDIAN);
            channel.read(buffer, at);
            return buffer.getLong(0);
        }
    }
}
