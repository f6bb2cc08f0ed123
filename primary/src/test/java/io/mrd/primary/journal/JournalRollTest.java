package io.mrd.primary.journal;

import io.mrd.layout.journal.JournalEvent;
import io.mrd.layout.journal.JournalEventType;
import io.mrd.layout.journal.JournalFileDescriptor;
import io.mrd.layout.journal.JournalRecordDescriptor;
import io.mrd.testing.TestDirs;
import io.mrd.tools.JournalReader;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The roll: a journal of 64 KiB given a hundred times more events than it holds stays four files of its share
 * each, and what a reader finds there is the newest events, consecutive and each once, across the files in lap
 * order; the oldest are gone. Each event carries its sequence number in {@code value}.
 */
final class JournalRollTest
{
    private static final long JOURNAL_SIZE = 64 * 1024;
    private static final long FILE_LENGTH = JournalFileDescriptor.fileLength(JOURNAL_SIZE);
    private static final int PER_FILE = (int)((FILE_LENGTH - JournalFileDescriptor.RECORDS_OFFSET) /
        JournalRecordDescriptor.RECORD_LENGTH);
    private static final int EVENTS = 100 * (int)(JOURNAL_SIZE / JournalRecordDescriptor.RECORD_LENGTH);

    private final Path dir = TestDirs.create("journal-roll");

    @AfterEach
    void removeDir()
    {
        TestDirs.deleteTree(dir);
    }

    @Test
    void aJournalGivenAHundredTimesItsSizeKeepsTheNewestEventsInOrderInBoundedFiles() throws IOException
    {
        final MappedEventJournal journal = MappedEventJournal.create(dir, JOURNAL_SIZE, 7);
        for (int i = 0; i < EVENTS; i++)
        {
            append(journal, i);
            if (i % 1000 == 0)
            {
                assertFilesBounded();
            }
        }
        final long lap = journal.lap();
        journal.close();
        assertFilesBounded();
        assertEquals(EVENTS / PER_FILE + 1, lap, "a lap per " + PER_FILE + " events");

        final List<JournalEvent> read = new ArrayList<>();
        final long lost;
        try (JournalReader reader = JournalReader.open(dir))
        {
            reader.poll(read::add);
            lost = reader.lostLaps();
        }
        assertEquals(0, lost, "a reader that starts after the writer finished loses no lap");
        // The last lap holds what the roll has written since it started, the three before it are full.
        final int inLastLap = EVENTS - (int)(lap - 1) * PER_FILE;
        assertEquals((JournalFileDescriptor.FILE_COUNT - 1) * PER_FILE + inLastLap, read.size(), "events kept");
        assertConsecutiveUpTo(read, EVENTS - 1);
        assertTrue(read.getFirst().value() > 0, "the oldest events are dropped");
        assertEquals(lap - JournalFileDescriptor.FILE_COUNT + 1, read.getFirst().lap(), "the oldest lap kept");
        assertEquals(lap, read.getLast().lap(), "the newest lap");
    }

    /**
     * A reader polling while the writer rolls, often enough to keep up (a few times per file), reads every event
     * ever written once, in order: it follows the writer from each lap into the next.
     */
    @Test
    void aReaderThatKeepsUpReadsEveryEventAcrossTheLaps()
    {
        final MappedEventJournal journal = MappedEventJournal.create(dir, JOURNAL_SIZE, 7);
        final List<JournalEvent> read = new ArrayList<>();
        try (JournalReader reader = JournalReader.open(dir))
        {
            for (int i = 0; i < EVENTS; i++)
            {
                append(journal, i);
                if (i % (PER_FILE / 3) == 0)
                {
                    reader.poll(read::add);
                }
            }
            journal.close();
            reader.poll(read::add);
            assertEquals(0, reader.lostLaps());
        }
        assertEquals(EVENTS, read.size(), "every event");
        assertConsecutiveUpTo(read, EVENTS - 1);
    }

    /**
     * A reader slower than the whole journal loses laps: it says how many jumps it made, and what it returns is
     * still in order, each event once.
     */
    @Test
    void aReaderOvertakenByTheWriterSaysSoAndNeverRepeatsAnEvent()
    {
        final MappedEventJournal journal = MappedEventJournal.create(dir, JOURNAL_SIZE, 7);
        final List<JournalEvent> read = new ArrayList<>();
        try (JournalReader reader = JournalReader.open(dir))
        {
            append(journal, 0);
            reader.poll(read::add);
            int i = 1;
            for (int round = 0; round < 5; round++)
            {
                final int end = i + (JournalFileDescriptor.FILE_COUNT + 1) * PER_FILE;
                for (; i < end; i++)
                {
                    append(journal, i);
                }
                reader.poll(read::add);
            }
            journal.close();
            assertEquals(5, reader.lostLaps(), "one jump per round");
        }
        for (int k = 1; k < read.size(); k++)
        {
            assertTrue(read.get(k).value() > read.get(k - 1).value(), "in order, once: event " + k + " of " +
                read.size() + " is " + read.get(k).value() + " after " + read.get(k - 1).value());
        }
    }

    private static void append(final EventJournal journal, final long sequence)
    {
        journal.append(JournalEventType.ALLOC, 0, 1, 0, sequence << 21, 2 << 20, 0, 0, sequence);
    }

    private static void assertConsecutiveUpTo(final List<JournalEvent> read, final long last)
    {
        final long first = last - read.size() + 1;
        for (int k = 0; k < read.size(); k++)
        {
            assertEquals(first + k, read.get(k).value(), "event " + k + " of " + read.size() +
                " (a gap or a repeat before it)");
            assertEquals(read.get(k).value() << 21, read.get(k).address(), "its address");
        }
    }

    private void assertFilesBounded() throws IOException
    {
        try (Stream<Path> files = Files.list(dir))
        {
            final List<Path> all = files.toList();
            assertEquals(JournalFileDescriptor.FILE_COUNT, all.size(), "files in " + dir + ": " + all);
            long total = 0;
            for (final Path file : all)
            {
                assertEquals(FILE_LENGTH, Files.size(file), file + "'s size");
                total += Files.size(file);
            }
            assertTrue(total <= JOURNAL_SIZE, total + " bytes on disk, over --journal-size " + JOURNAL_SIZE);
        }
    }
}
