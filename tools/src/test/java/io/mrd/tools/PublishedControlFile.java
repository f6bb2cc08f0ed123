package io.mrd.tools;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.HeaderDescriptor;
import io.mrd.layout.HistogramsSection;
import io.mrd.layout.MrdCounter;
import io.mrd.layout.MrdHistogram;
import io.mrd.testing.TestDirs;
import org.HdrHistogram.Histogram;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.AtomicCounter;
import org.agrona.concurrent.status.CountersManager;
import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import java.nio.ByteBuffer;
import java.nio.file.Path;

/**
 * A control file written the way a daemon publishes one, without a daemon: a live header, counters allocated as
 * the daemon allocates them, and histogram entries encoded as the daemon encodes them. The tools' tests read it
 * as {@code mrd stat} reads a daemon's. A JUnit extension: each test gets a new file in a directory of its own,
 * removed after it.
 */
final class PublishedControlFile implements BeforeEachCallback, AfterEachCallback
{
    private Path dir;
    private ControlFile written;
    private ControlFile view;
    private CountersManager counters;

    public void beforeEach(final ExtensionContext context)
    {
        dir = TestDirs.create("tools");
        written = ControlFile.create(dir.resolve(ControlFile.FILE_NAME), ControlFileLayout.compute(1, 8, 16, 16, 4),
            4096);
        written.header().magic(HeaderDescriptor.MAGIC).heartbeatMs(System.currentTimeMillis())
            .heartbeatIntervalMs(100).heartbeatStaleLimitMs(1000);
        written.header().publishLayoutVersion(HeaderDescriptor.LAYOUT_VERSION);
        counters = new CountersManager(
            new UnsafeBuffer(written.buffer(), written.layout().countersMetadataOffset(),
                written.layout().countersMetadataLength()),
            new UnsafeBuffer(written.buffer(), written.layout().countersValuesOffset(),
                written.layout().countersValuesLength()));
        view = ControlFile.openReadOnly(written.path());
    }

    public void afterEach(final ExtensionContext context)
    {
        try
        {
            view.close();
            written.close();
        }
        finally
        {
            TestDirs.deleteTree(dir);
        }
    }

    /** @return the file as a tool opens it, read-only. */
    ControlFile view()
    {
        return view;
    }

    /** @return the writable mapping, for what the daemon writes into the header. */
    ControlFile written()
    {
        return written;
    }

    AtomicCounter counter(final MrdCounter counter)
    {
        return counters.newCounter(counter.label(), counter.typeId());
    }

    /**
     * @return a histogram as the daemon records one (two significant digits), holding {@code values}.
     */
    static Histogram histogram(final long... values)
    {
        final Histogram histogram = new Histogram(1, 1L << 44, 2);
        for (final long value : values)
        {
            histogram.recordValue(value);
        }
        return histogram;
    }

    /**
     * Publishes one set of entries, as the daemon does at a heartbeat.
     */
    void publish(final long publishedTimeMs, final Entry... entries)
    {
        final HistogramsSection section = written.histograms();
        section.beginWrite();
        for (final Entry entry : entries)
        {
            final ByteBuffer encoding = ByteBuffer.allocate(entry.histogram().getNeededByteBufferCapacity());
            final int length = entry.histogram().encodeIntoByteBuffer(encoding);
            section.putEntry(entry.kind().id(), entry.label(), entry.sum(), new UnsafeBuffer(encoding), length);
        }
        section.endWrite(publishedTimeMs);
    }

    /**
     * Leaves the histograms section as a daemon killed while writing it does.
     */
    void tearHistograms()
    {
        written.histograms().beginWrite();
    }

    record Entry(MrdHistogram kind, int label, long sum, Histogram histogram)
    {
        static Entry of(final MrdHistogram kind, final int label, final long... values)
        {
            long sum = 0;
            for (final long value : values)
            {
                sum += value;
            }
            return new Entry(kind, label, sum, PublishedControlFile.histogram(values));
        }
    }
}
