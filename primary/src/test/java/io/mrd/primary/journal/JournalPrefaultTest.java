package io.mrd.primary.journal;

import io.mrd.layout.journal.JournalFileDescriptor;
import io.mrd.layout.sys.Posix;
import io.mrd.testing.TestDirs;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

import static org.junit.jupiter.api.Assertions.assertEquals;

/**
 * A new journal's first file is resident before the first append, so that no append pays a page's first fault,
 * and the others once the prefault thread is done (long before the first lap fills the first file):
 * {@code mincore} over a mapping of each file (for a shared file mapping it reports the page cache, whichever
 * mapping faulted the page) finds every page present.
 */
final class JournalPrefaultTest
{
    private static final long JOURNAL_SIZE = 4L << 20;
    private static final int PAGE = 4096;

    private final Path dir = TestDirs.create("journal-prefault");

    @AfterEach
    void removeDir()
    {
        TestDirs.deleteTree(dir);
    }

    @Test
    void theFirstFileIsResidentBeforeTheFirstAppendAndTheOthersOncePrefaulted() throws IOException
    {
        final long fileLength = JournalFileDescriptor.fileLength(JOURNAL_SIZE);
        final int pages = (int)(fileLength / PAGE);
        try (MappedEventJournal journal = MappedEventJournal.create(dir, JOURNAL_SIZE, 7))
        {
            final Path first = dir.resolve(JournalFileDescriptor.fileName(0));
            assertEquals(pages, residentPages(first, fileLength, pages), first + ": resident pages of " + pages);
            journal.awaitPrefault();
            for (int i = 1; i < JournalFileDescriptor.FILE_COUNT; i++)
            {
                final Path file = dir.resolve(JournalFileDescriptor.fileName(i));
                assertEquals(pages, residentPages(file, fileLength, pages), file + ": resident pages of " + pages);
            }
        }
    }

    private static int residentPages(final Path file, final long length, final int pages) throws IOException
    {
        try (Arena arena = Arena.ofConfined();
            FileChannel channel = FileChannel.open(file, StandardOpenOption.READ))
        {
            final MemorySegment mapping = channel.map(FileChannel.MapMode.READ_ONLY, 0, length, arena);
            final MemorySegment vector = arena.allocate(pages);
            assertEquals(0, Posix.mincore(mapping.address(), length, vector), "mincore errno");
            int resident = 0;
            for (int page = 0; page < pages; page++)
            {
                resident += vector.get(ValueLayout.JAVA_BYTE, page) & 1;
            }
            return resident;
        }
    }
}
