package io.mrd.primary.journal;

import io.mrd.layout.FileFailure;
import io.mrd.layout.MrdException;
import io.mrd.layout.journal.JournalEventType;
import io.mrd.layout.journal.JournalFileDescriptor;
import io.mrd.layout.journal.JournalRecord;
import io.mrd.layout.sys.Posix;
import net.openhft.chronicle.bytes.MappedBytes;
import org.agrona.concurrent.EpochNanoClock;
import org.agrona.concurrent.SystemEpochNanoClock;
import org.agrona.concurrent.UnsafeBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Set;
import java.util.concurrent.locks.ReentrantLock;

import static io.mrd.layout.journal.JournalFileDescriptor.FILE_COUNT;
import static io.mrd.layout.journal.JournalFileDescriptor.RECORDS_OFFSET;
import static io.mrd.layout.journal.JournalRecordDescriptor.RECORD_LENGTH;

/**
 * The daemon's event journal: {@link JournalFileDescriptor#FILE_COUNT} files in {@code DIR/journal}, each mapped
 * whole and shared through Chronicle Bytes' {@link MappedBytes#singleMappedBytes}, and written at absolute offsets
 * through an Agrona buffer over that mapping: the records through the {@link JournalRecord} flyweight that
 * {@code io.mrd.tools.JournalReader} reads them with (plain stores for the fields, an ordered one for the commit
 * word), so that writer and reader share one statement of the layout.
 * <p>
 * <b>Why this Chronicle API.</b> {@code singleMappedBytes} maps each file once, at its whole length, when the
 * daemon starts: an append is then a few stores into memory, with no system call, no fsync and no remapping
 * (the chunked {@code MappedBytes.mappedBytes} maps chunk by chunk as the write position moves on, which would
 * put an mmap on the path of the event that crosses a chunk). Chronicle Queue, built for journals, is not a
 * dependency, and its own roll cycles, index files and tailers are more than a bounded list of 64-byte records
 * needs; its readers would also need Chronicle, where {@code mrd events} reads this layout with the plain
 * mapping of {@code io.mrd.tools.JournalReader}.
 * <p>
 * <b>Locking.</b> One {@link ReentrantLock} around each append: the lap and write position it guards change
 * together with the file's header when a lap starts, and a claimed slot must be committed before the next lap
 * could reuse its file. The lock is held only for the clock read and the eight stores of one record (and, once a
 * lap, the two of a file header): never for anything else, so it may be taken under the engine's locks. Chronicle's
 * single-thread checks are off for the mappings, as several threads write them under this lock.
 */
public final class MappedEventJournal implements EventJournal, AutoCloseable
{
    private static final Logger LOG = LoggerFactory.getLogger(MappedEventJournal.class);

    static
    {
        // chronicle-core would otherwise try to send usage analytics from a daemon that has no business talking
        // to the network.
        if (null == System.getProperty("chronicle.analytics.disable"))
        {
            System.setProperty("chronicle.analytics.disable", "true");
        }
    }

    private static final Set<PosixFilePermission> DIRECTORY_MODE = PosixFilePermissions.fromString("rwxr-x---");
    private static final Set<PosixFilePermission> FILE_MODE = PosixFilePermissions.fromString("rw-r-----");

    private final Path dir;
    private final long fileLength;
    private final long journalSize;
    private final MappedBytes[] files = new MappedBytes[FILE_COUNT];
    /** Each file's mapping, as the buffer the header and records are stored through. */
    private final UnsafeBuffer[] buffers = new UnsafeBuffer[FILE_COUNT];
    /** Guarded by {@link #lock}. */
    private final JournalRecord record = new JournalRecord();
    private final EpochNanoClock clock;
    private final ReentrantLock lock = new ReentrantLock();
    /** The lap being written; guarded by {@link #lock}. */
    private long lap;
    /** Offset of the next record in the lap's file; guarded by {@link #lock}. */
    private int position;
    /** Guarded by {@link #lock}. */
    private boolean closed;
    /** Faults in the files after the first ({@link #prefaultTheOthers}); joined by {@link #close}. */
    private Thread prefaulting;

    private MappedEventJournal(final Path dir, final long journalSize, final EpochNanoClock clock)
    {
        this.dir = dir;
        this.journalSize = journalSize;
        this.fileLength = JournalFileDescriptor.fileLength(journalSize);
        this.clock = clock;
    }

    /**
     * Initialises Chronicle Bytes (its OS layer and mapping classes: most of a second on a small machine, the first
     * time in a process), which {@link #create} would otherwise do.
     */
    public static void loadLibrary()
    {
        try
        {
            Class.forName(MappedBytes.class.getName(), true, MappedEventJournal.class.getClassLoader());
        }
        catch (final ClassNotFoundException ex)
        {
            throw new IllegalStateException("Chronicle Bytes is not on the class path", ex);
        }
    }

    /**
     * Creates the journal in {@code dir} (which is created), its files at their whole length, and starts lap 1.
     *
     * @param journalSize the bound of all files together ({@code --journal-size}).
     * @param epoch       the daemon's epoch, written in every file's header.
     * @throws MrdException with the errno when a file cannot be created or mapped.
     */
    public static MappedEventJournal create(final Path dir, final long journalSize, final long epoch)
    {
        return create(dir, journalSize, epoch, SystemEpochNanoClock.INSTANCE);
    }

    static MappedEventJournal create(final Path dir, final long journalSize, final long epoch,
        final EpochNanoClock clock)
    {
        final MappedEventJournal journal = new MappedEventJournal(dir, journalSize, clock);
        try
        {
            // The records name every client's ranges and keys: modes as the control file's, not the umask's.
            Files.createDirectories(dir, PosixFilePermissions.asFileAttribute(DIRECTORY_MODE));
            Files.setPosixFilePermissions(dir, DIRECTORY_MODE);
            for (int i = 0; i < FILE_COUNT; i++)
            {
                final Path file = dir.resolve(JournalFileDescriptor.fileName(i));
                Files.deleteIfExists(file);
                Files.createFile(file, PosixFilePermissions.asFileAttribute(FILE_MODE));
                final MappedBytes bytes = MappedBytes.singleMappedBytes(file.toFile(), journal.fileLength);
                bytes.singleThreadedCheckDisabled(true);
                journal.files[i] = bytes;
                // At most a quarter of MAX_JOURNAL_SIZE: an int length, as the reader maps it.
                final long address = bytes.bytesStore().addressForWrite(0);
                if (0 == i)
                {
                    prefault(file, address, journal.fileLength);
                }
                final UnsafeBuffer buffer = new UnsafeBuffer(address, (int)journal.fileLength);
                buffer.putLong(JournalFileDescriptor.EPOCH_OFFSET, epoch);
                buffer.putLong(JournalFileDescriptor.FILE_LENGTH_OFFSET, journal.fileLength);
                buffer.putInt(JournalFileDescriptor.MAGIC_OFFSET, JournalFileDescriptor.MAGIC);
                buffer.putIntOrdered(JournalFileDescriptor.LAYOUT_VERSION_OFFSET, JournalFileDescriptor.LAYOUT_VERSION);
                journal.buffers[i] = buffer;
            }
        }
        catch (final IOException | RuntimeException ex)
        {
            journal.close();
            if (ex instanceof MrdException mrd)
            {
                throw mrd;
            }
            throw FileFailure.of(ex instanceof IOException io ? io : new IOException(ex.toString(), ex),
                "cannot create the event journal in", dir, "check the run directory, or start with --journal-size 0");
        }
        journal.startLap(1);
        journal.prefaultTheOthers();
        return journal;
    }

    /**
     * Faults in the files after the first on a thread of their own: the first lap fills the first file before
     * any record reaches the second, and the daemon's start (an adoption's 500 ms above all) need not wait for
     * the others' pages. {@link #close} waits for it before it unmaps them.
     */
    private void prefaultTheOthers()
    {
        prefaulting = Thread.ofPlatform().daemon().name("mrd-journal-prefault").start(() ->
        {
            for (int i = 1; i < FILE_COUNT; i++)
            {
                prefault(dir.resolve(JournalFileDescriptor.fileName(i)), buffers[i].addressOffset(), fileLength);
            }
        });
    }

    /**
     * Waits for {@link #prefaultTheOthers}: its madvise must not run over a mapping being unmapped (and a test
     * waits for it to see every file resident).
     */
    void awaitPrefault()
    {
        boolean interrupted = false;
        while (null != prefaulting && prefaulting.isAlive())
        {
            try
            {
                prefaulting.join();
            }
            catch (final InterruptedException ex)
            {
                interrupted = true;
            }
        }
        if (interrupted)
        {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * Faults in every page of a file's mapping before the first append: a fresh page of the sparse file costs an
     * allocation and a zeroing in the kernel on first touch, which would otherwise land on the request whose record
     * crosses into it (one in every {@code 4096 / RECORD_LENGTH} records). The journal's memory is committed at start
     * instead, all {@code --journal-size} of it. A kernel without {@code MADV_POPULATE_WRITE} (before 5.14) refuses
     * it, and the pages are faulted as the records reach them, as before.
     */
    private static void prefault(final Path file, final long address, final long length)
    {
        final int errno = Posix.madvise(address, length, Posix.MADV_POPULATE_WRITE);
        if (0 != errno)
        {
            LOG.debug("journal file {}: pages not pre-faulted (madvise MADV_POPULATE_WRITE: errno {}); they fault " +
                "in as records reach them", file, errno);
        }
    }

    /**
     * Keeps the journal a previous daemon left in {@code runDir}: renames {@code journal/} to
     * {@code journal.previous/} (replacing an older one), so that {@code mrd events --previous} still reads it.
     *
     * @return true when there was one.
     * @throws MrdException with the errno when the rename fails.
     */
    public static boolean keepPrevious(final Path runDir)
    {
        final Path current = runDir.resolve(JournalFileDescriptor.DIRECTORY);
        final Path previous = runDir.resolve(JournalFileDescriptor.PREVIOUS_DIRECTORY);
        if (!Files.isDirectory(current))
        {
            return false;
        }
        try
        {
            if (Files.isDirectory(previous))
            {
                for (int i = 0; i < FILE_COUNT; i++)
                {
                    Files.deleteIfExists(previous.resolve(JournalFileDescriptor.fileName(i)));
                }
                Files.deleteIfExists(previous);
            }
            Files.move(current, previous, StandardCopyOption.ATOMIC_MOVE);
            return true;
        }
        catch (final IOException ex)
        {
            throw FileFailure.of(ex, "cannot keep the previous event journal", current,
                "remove " + previous + " or start with --journal-size 0");
        }
    }

    public void append(
        final JournalEventType type, final int flags, final int client, final int arg, final long address,
        final long length, final int lkey, final int rkey, final long value)
    {
        lock.lock();
        try
        {
            if (closed)
            {
                return;
            }
            if (position + RECORD_LENGTH > fileLength)
            {
                startLap(lap + 1);
            }
            record.wrap(buffers[JournalFileDescriptor.fileIndex(lap)], position)
                .recordLength(RECORD_LENGTH)
                .type(type.code())
                .flags(flags)
                .timeNs(clock.nanoTime())
                .client(client)
                .arg(arg)
                .address(address)
                .rangeLength(length)
                .lkey(lkey)
                .rkey(rkey)
                .value(value)
                .commit(lap);
            position += RECORD_LENGTH;
        }
        finally
        {
            lock.unlock();
        }
    }

    /**
     * Starts {@code next} in its file, over the oldest lap: the time first, then the lap with an ordered store,
     * so that a reader of the old lap sees its file taken before any record of the new one. Caller holds the lock
     * (or is {@link #create}, before the journal is shared).
     */
    private void startLap(final long next)
    {
        final UnsafeBuffer buffer = buffers[JournalFileDescriptor.fileIndex(next)];
        buffer.putLong(JournalFileDescriptor.LAP_START_OFFSET, clock.nanoTime());
        buffer.putLongOrdered(JournalFileDescriptor.LAP_OFFSET, next);
        lap = next;
        position = RECORDS_OFFSET;
    }

    /** @return the directory of the files. */
    public Path dir()
    {
        return dir;
    }

    /** @return the bound of all files together. */
    public long journalSize()
    {
        return journalSize;
    }

    /** @return the lap being written (for tests of the roll). */
    long lap()
    {
        lock.lock();
        try
        {
            return lap;
        }
        finally
        {
            lock.unlock();
        }
    }

    /**
     * Unmaps the files; they stay in the directory for {@code mrd events}. Appends after this record nothing.
     */
    public void close()
    {
        // Closed under the lock, unmapped after it: an append that took the lock before has finished its stores,
        // and every later one sees closed.
        lock.lock();
        try
        {
            closed = true;
        }
        finally
        {
            lock.unlock();
        }
        awaitPrefault();
        for (int i = 0; i < FILE_COUNT; i++)
        {
            if (null != files[i])
            {
                files[i].releaseLast();
                files[i] = null;
                buffers[i] = null;
            }
        }
        LOG.debug("event journal {} closed", dir);
    }
}
