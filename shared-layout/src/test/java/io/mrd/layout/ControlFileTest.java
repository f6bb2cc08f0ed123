package io.mrd.layout;

import io.mrd.layout.sys.ProcMaps;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * Creating a control file, and every answer {@link ControlFile#openReadOnly} gives: ready, not yet ready,
 * not ours, another version, absent, truncated; and that the read-only mapping really is read-only.
 */
final class ControlFileTest
{
    private static final long PAGE_SIZE = 4096;

    @TempDir
    Path dir;

    @Test
    void openReadOnlySeesTheLayoutThePrimaryWrote() throws IOException
    {
        final Path path = dir.resolve(ControlFile.FILE_NAME);
        final ControlFileLayout layout = ControlFileLayout.compute(2, 16, 32, 100, 4);
        try (ControlFile primary = ControlFile.create(path, layout, PAGE_SIZE))
        {
            primary.header().magic(HeaderDescriptor.MAGIC).epoch(0x1234_5678_9ABCL).providerName("soft");
            primary.header().publishLayoutVersion(HeaderDescriptor.LAYOUT_VERSION);
            assertEquals(0, Files.size(path) % PAGE_SIZE);
            assertTrue(Files.size(path) >= layout.fileLength());
            assertEquals(layout.fileLength(), primary.header().fileLength());

            try (ControlFile secondary = ControlFile.openReadOnly(path))
            {
                final ControlFileLayout read = secondary.layout();
                assertEquals(layout.fileLength(), read.fileLength());
                assertEquals(layout.mrCapacity(), read.mrCapacity());
                assertEquals(layout.cacheCapacity(), read.cacheCapacity());
                assertEquals(layout.clientCapacity(), read.clientCapacity());
                assertEquals(layout.memsegListCount(), read.memsegListCount());
                assertEquals(layout.segmentsPerList(), read.segmentsPerList());
                final long[][] expected = layout.sections();
                final long[][] actual = read.sections();
                for (int i = 0; i < expected.length; i++)
                {
                    assertArrayEquals(expected[i], actual[i], ControlFileLayout.SECTION_NAMES[i]);
                }
                assertEquals(0x1234_5678_9ABCL, secondary.header().epoch());
                assertEquals("soft", secondary.header().providerName());

                // One file, two mappings: a store by the primary is seen through the secondary's.
                primary.header().devGen(77);
                assertEquals(77, secondary.header().devGen());
                primary.seqLock().beginWrite();
                assertEquals(1, secondary.seqLock().sequence() & 1);
                primary.seqLock().endWrite();
                assertEquals(2, secondary.seqLock().sequence());
            }
        }
    }

    @Test
    void theReadOnlyMappingIsReadOnly() throws IOException
    {
        final Path path = createReady(HeaderDescriptor.MAGIC, HeaderDescriptor.LAYOUT_VERSION);
        final String real = path.toRealPath().toString();
        try (ControlFile secondary = ControlFile.openReadOnly(path))
        {
            final long address = secondary.buffer().addressOffset();
            final ProcMaps.Mapping m = ProcMaps.covering(address);
            assertTrue(null != m && m.path().equals(real), "mapping of " + real + ": " + m);
            assertEquals(address, m.start());
            assertEquals("r--s", m.perms(), m.toString());
        }
        assertEquals(List.of(), ProcMaps.ofFile(real), "close() unmaps");
    }

    @Test
    void unpublishedFileIsNotReadyYet() throws IOException
    {
        final Path path = createReady(HeaderDescriptor.MAGIC, 0);
        final MrdException ex = assertThrows(MrdException.class, () -> ControlFile.openReadOnly(path));
        assertEquals(ErrorCode.EAGAIN, ex.code());
        assertTrue(ex.getMessage().contains(path.toString()), ex.getMessage());
        assertNoMappingOf(path);
    }

    @Test
    void foreignMagicIsAProtocolError() throws IOException
    {
        final Path path = createReady(0x12345678, HeaderDescriptor.LAYOUT_VERSION);
        final MrdException ex = assertThrows(MrdException.class, () -> ControlFile.openReadOnly(path));
        assertEquals(ErrorCode.EPROTO, ex.code());
        assertTrue(ex.getMessage().contains("12345678"), ex.getMessage());
        assertTrue(ex.getMessage().contains("not an mrd control file"), ex.getMessage());
        assertNoMappingOf(path);
    }

    @Test
    void anotherLayoutVersionIsRefusedNamingBoth() throws IOException
    {
        final int other = HeaderDescriptor.LAYOUT_VERSION + 1;
        final Path path = createReady(HeaderDescriptor.MAGIC, other);
        final MrdException ex = assertThrows(MrdException.class, () -> ControlFile.openReadOnly(path));
        assertEquals(ErrorCode.EPROTO, ex.code());
        assertTrue(ex.getMessage().contains("layout version " + other), ex.getMessage());
        assertTrue(ex.getMessage().contains("reads version " + HeaderDescriptor.LAYOUT_VERSION), ex.getMessage());
        assertNoMappingOf(path);
    }

    @Test
    void missingFileSaysNoDaemonRanThere()
    {
        final Path path = dir.resolve(ControlFile.FILE_NAME);
        final MrdException ex = assertThrows(MrdException.class, () -> ControlFile.openReadOnly(path));
        assertEquals(ErrorCode.ENOENT, ex.code());
        assertTrue(ex.getMessage().contains(path.toString()), ex.getMessage());
        assertTrue(ex.getMessage().contains("mrd start"), ex.getMessage());
    }

    @Test
    void fileShorterThanAHeaderIsNotReadyYet() throws IOException
    {
        final Path path = Files.write(dir.resolve(ControlFile.FILE_NAME), new byte[100]);
        final MrdException ex = assertThrows(MrdException.class, () -> ControlFile.openReadOnly(path));
        assertEquals(ErrorCode.EAGAIN, ex.code());
        final MrdException empty = assertThrows(MrdException.class,
            () -> ControlFile.openReadOnly(Files.write(dir.resolve("empty.ctl"), new byte[0])));
        assertEquals(ErrorCode.EAGAIN, empty.code());
    }

    @Test
    void headerLongerThanTheFileIsCorrupt() throws IOException
    {
        final Path path = dir.resolve(ControlFile.FILE_NAME);
        final ControlFileLayout layout = ControlFileLayout.compute(1, 1, 1, 2, 1);
        try (ControlFile primary = ControlFile.create(path, layout, PAGE_SIZE))
        {
            primary.header().magic(HeaderDescriptor.MAGIC);
            primary.buffer().putLong(HeaderDescriptor.FILE_LENGTH_OFFSET, Files.size(path) + PAGE_SIZE);
            primary.header().publishLayoutVersion(HeaderDescriptor.LAYOUT_VERSION);
        }
        final MrdException ex = assertThrows(MrdException.class, () -> ControlFile.openReadOnly(path));
        assertEquals(ErrorCode.EPROTO, ex.code());
        assertTrue(ex.getMessage().contains("truncated"), ex.getMessage());
        assertNoMappingOf(path);
    }

    @Test
    void createReplacesAnOldFile() throws IOException
    {
        final Path path = Files.write(dir.resolve(ControlFile.FILE_NAME), new byte[]{1, 2, 3});
        final ControlFileLayout layout = ControlFileLayout.compute(1, 1, 1, 2, 1);
        try (ControlFile primary = ControlFile.create(path, layout, PAGE_SIZE))
        {
            assertEquals(0, primary.header().magic());
            assertEquals(0, primary.header().layoutVersion());
            assertEquals(0, Files.size(path) % PAGE_SIZE);
            primary.close();
        }
    }

    @Test
    void heartbeatAgeKnowsACleanShutdown()
    {
        final Path path = dir.resolve(ControlFile.FILE_NAME);
        try (ControlFile primary = ControlFile.create(path, ControlFileLayout.compute(1, 1, 1, 2, 1), PAGE_SIZE))
        {
            primary.header().heartbeatMs(1_000);
            assertEquals(500, primary.heartbeatAgeMs(1_500));
            assertEquals(0, primary.heartbeatAgeMs(900), "a clock step back is not a negative age");
            primary.header().heartbeatMs(HeaderDescriptor.HEARTBEAT_CLOSED);
            assertEquals(-1, primary.heartbeatAgeMs(1_500));
            assertEquals(0, primary.counter(MrdCounter.MRS_CREATED), "no counter allocated yet");
        }
    }

    private Path createReady(final int magic, final int version)
    {
        final Path path = dir.resolve(ControlFile.FILE_NAME);
        try (ControlFile primary = ControlFile.create(path, ControlFileLayout.compute(1, 4, 4, 8, 2), PAGE_SIZE))
        {
            primary.header().magic(magic);
            if (version != 0)
            {
                primary.header().publishLayoutVersion(version);
            }
        }
        return path;
    }

    private static void assertNoMappingOf(final Path path) throws IOException
    {
        assertEquals(List.of(), ProcMaps.ofFile(path.toRealPath().toString()), "a failed open leaves no mapping");
    }
}
