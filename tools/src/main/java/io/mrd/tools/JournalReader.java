package io.mrd.tools;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.FileFailure;
import io.mrd.layout.MrdException;
import io.mrd.layout.journal.JournalEvent;
import io.mrd.layout.journal.JournalFileDescriptor;
import io.mrd.layout.journal.JournalRecord;
import io.mrd.layout.journal.JournalRecordDescriptor;
import org.agrona.concurrent.UnsafeBuffer;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.function.Consumer;

import static io.mrd.layout.journal.JournalFileDescriptor.FILE_COUNT;
import static io.mrd.layout.journal.JournalFileDescriptor.LAP_OFFSET;
import static io.mrd.layout.journal.JournalFileDescriptor.RECORDS_OFFSET;
import static io.mrd.layout.journal.JournalRecordDescriptor.RECORD_LENGTH;

/**
 * Reads a journal directory ({@link JournalFileDescriptor}) in order, oldest lap first, through read-only
 * shared mappings: what {@code mrd events} prints, from a live daemon (each {@link #poll} returns what was
 * committed since the last) or from a dead one's directory (the journal ends at the last committed record).
 * <p>
 * A record is taken only when its commit word holds its file's lap and the checksum of its fields
 * ({@link JournalRecordDescriptor}, read through the {@link JournalRecord} flyweight the writer stores with); the
 * first one that does not is the end of the lap. When the writer has started the next lap meanwhile, the reader
 * goes on there. When the writer has overwritten the file of the lap being read (a reader slower than a whole
 * journal), the events in between are lost: {@link #lostLaps()} counts such jumps and the reader goes on from
 * the oldest lap still there. The lap is read again after each record, so that a record the writer overwrote
 * while it was read is never returned.
 */
public final class JournalReader implements AutoCloseable
{
    private static final String GIVE_A_JOURNAL = "give a journal directory such as DIR/" +
        JournalFileDescriptor.DIRECTORY;

    private final Path dir;
    private final UnsafeBuffer[] files = new UnsafeBuffer[FILE_COUNT];
    private final long[] fileLengths = new long[FILE_COUNT];
    private final JournalRecord record = new JournalRecord();
    private long lap;
    private int sequence;
    private long lostLaps;

    private JournalReader(final Path dir)
    {
        this.dir = dir;
    }

    /**
     * Maps every file of the journal in {@code dir} read-only.
     *
     * @throws MrdException ENOENT when {@code dir} holds no journal file, EINVAL when a file is not a journal of
     *                      this layout version (naming both versions), or the errno of a file that cannot be read.
     */
    public static JournalReader open(final Path dir)
    {
        if (Files.exists(dir) && !Files.isDirectory(dir))
        {
            throw FileFailure.of(ErrorCode.ENOTDIR, "cannot read the journal", dir, GIVE_A_JOURNAL);
        }
        final JournalReader reader = new JournalReader(dir);
        int found = 0;
        for (int i = 0; i < FILE_COUNT; i++)
        {
            final Path file = dir.resolve(JournalFileDescriptor.fileName(i));
            // Opened, not looked for: a directory this user may not search must say EACCES, not "no journal".
            try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ))
            {
                final long size = channel.size();
                if (size < JournalFileDescriptor.MIN_FILE_LENGTH || size > Integer.MAX_VALUE)
                {
                    throw new MrdException(ErrorCode.EINVAL, file + " is not an mrd journal file (" + size +
                        " bytes): " + GIVE_A_JOURNAL);
                }
                final UnsafeBuffer buffer = new UnsafeBuffer(channel.map(FileChannel.MapMode.READ_ONLY, 0, size));
                checkHeader(file, buffer);
                reader.files[i] = buffer;
                reader.fileLengths[i] = size;
                found++;
            }
            catch (final NoSuchFileException ex)
            {
                // a journal's files are created together; a missing one is checked for below
            }
            catch (final IOException ex)
            {
                throw FileFailure.of(ex, "cannot read the journal file", file, "run as the daemon's user");
            }
        }
        if (found == 0)
        {
            throw new MrdException(ErrorCode.ENOENT, "no journal in " + dir + ": the daemon there ran with " +
                "--journal-size 0 or never ran there: give the run directory of a daemon with --dir");
        }
        return reader;
    }

    private static void checkHeader(final Path file, final UnsafeBuffer buffer)
    {
        final int magic = buffer.getInt(JournalFileDescriptor.MAGIC_OFFSET);
        final int version = buffer.getIntVolatile(JournalFileDescriptor.LAYOUT_VERSION_OFFSET);
        // A file the daemon is still creating reads all zeros: it holds no lap yet.
        if (magic == 0 && version == 0)
        {
            return;
        }
        if (magic != JournalFileDescriptor.MAGIC)
        {
            throw new MrdException(ErrorCode.EINVAL, file + " is not an mrd journal file (magic " +
                Integer.toHexString(magic) + "): " + GIVE_A_JOURNAL);
        }
        if (version != JournalFileDescriptor.LAYOUT_VERSION)
        {
            throw new MrdException(ErrorCode.EINVAL, file + " has journal layout version " + version + ", this " +
                "reader knows version " + JournalFileDescriptor.LAYOUT_VERSION + ": read it with the mrd that wrote it");
        }
    }

    /** @return the directory read. */
    public Path dir()
    {
        return dir;
    }

    /** @return how often the writer overwrote the lap being read before the reader got through it. */
    public long lostLaps()
    {
        return lostLaps;
    }

    /**
     * Hands every record committed since the last call to {@code sink}, in order.
     *
     * @return the number of events handed over.
     */
    public int poll(final Consumer<JournalEvent> sink)
    {
        int count = 0;
        while (true)
        {
            if (lap == 0)
            {
                lap = oldestLap();
                sequence = 0;
                if (lap == 0)
                {
                    return count;
                }
            }
            final int index = JournalFileDescriptor.fileIndex(lap);
            final UnsafeBuffer file = files[index];
            if (null == file || file.getLongVolatile(LAP_OFFSET) != lap)
            {
                lostLaps++;
                lap = 0;
                continue;
            }
            final long offset = RECORDS_OFFSET + (long)sequence * RECORD_LENGTH;
            final JournalEvent event = offset + RECORD_LENGTH <= fileLengths[index] ? read(file, (int)offset) : null;
            if (null == event)
            {
                if (lapStarted(lap + 1))
                {
                    lap++;
                    sequence = 0;
                    continue;
                }
                return count;
            }
            if (file.getLongVolatile(LAP_OFFSET) != lap)
            {
                continue;
            }
            sequence++;
            count++;
            sink.accept(event);
        }
    }

    /**
     * @return the record at {@code offset} when it is committed for {@link #lap}, else null.
     */
    private JournalEvent read(final UnsafeBuffer file, final int offset)
    {
        return record.wrap(file, offset).isCommitted(lap) ? record.toEvent(lap, sequence) : null;
    }

    private boolean lapStarted(final long next)
    {
        final UnsafeBuffer file = files[JournalFileDescriptor.fileIndex(next)];
        return null != file && file.getLongVolatile(LAP_OFFSET) == next;
    }

    /**
     * @return the oldest lap any file holds, or 0 when none holds one.
     */
    private long oldestLap()
    {
        long oldest = 0;
        for (final UnsafeBuffer file : files)
        {
            final long fileLap = null == file ? 0 : file.getLongVolatile(LAP_OFFSET);
            if (fileLap > 0 && (oldest == 0 || fileLap < oldest))
            {
                oldest = fileLap;
            }
        }
        return oldest;
    }

    /**
     * Unmaps nothing: the mappings go with the buffers, as the control file's readers' do.
     */
    public void close()
    {
        java.util.Arrays.fill(files, null);
    }
}
