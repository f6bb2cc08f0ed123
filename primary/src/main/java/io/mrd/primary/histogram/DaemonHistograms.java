package io.mrd.primary.histogram;

import io.mrd.layout.ControlFile;
import io.mrd.layout.HistogramsDescriptor;
import io.mrd.layout.HistogramsSection;
import io.mrd.layout.MrdHistogram;
import io.mrd.layout.protocol.MessageType;
import org.agrona.concurrent.UnsafeBuffer;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * The daemon's {@link MrdHistogram}s: recorded by the hooks through {@link Histograms} into
 * {@link IntervalHistogram}s, and written whole into the control file's histograms section by
 * {@link #publish} at every heartbeat, where {@code mrd stat} and the metrics endpoint read them
 * ({@link io.mrd.tools.PublishedHistogram}).
 */
public final class DaemonHistograms implements Histograms
{
    /** The request types timed: every request a client sends but IMPORT_PD, whose reply waits on fd passing. */
    public static final List<MessageType> TIMED_REQUESTS = List.of(
        MessageType.HELLO, MessageType.CREATE_MR, MessageType.ALLOC, MessageType.FREE, MessageType.REG_EXTERNAL,
        MessageType.DEREG_EXTERNAL, MessageType.QUEUES, MessageType.STOP);
    /** Longest duration told apart: 10 minutes; longer ones count as this (their sum stays exact). */
    public static final long HIGHEST_DURATION_NS = 600_000_000_000L;
    /** Largest size told apart: 16 TiB. */
    public static final long HIGHEST_SIZE_BYTES = 1L << 44;

    private final HistogramsSection section;
    /** Indexed by {@link MessageType#code()}; null for the types not timed. */
    private final IntervalHistogram[] requests = new IntervalHistogram[MessageType.QUEUES.code() + 1];
    private final IntervalHistogram registrationDuration = new IntervalHistogram(HIGHEST_DURATION_NS);
    private final IntervalHistogram registrationSize = new IntervalHistogram(HIGHEST_SIZE_BYTES);
    private final IntervalHistogram memoryEvent = new IntervalHistogram(HIGHEST_DURATION_NS);
    private final IntervalHistogram pinned = new IntervalHistogram(HIGHEST_SIZE_BYTES);
    private final List<Series> series = new ArrayList<>();
    private final ByteBuffer encoding;
    private final UnsafeBuffer encoded;

    /**
     * @throws IllegalStateException when the worst-case encodings would not fit in the section: a histogram was
     *                               added without growing {@code ControlFileLayout.HISTOGRAMS_LENGTH}.
     */
    public DaemonHistograms(final ControlFile ctl)
    {
        this.section = ctl.histograms();
        for (final MessageType type : TIMED_REQUESTS)
        {
            requests[type.code()] = new IntervalHistogram(HIGHEST_DURATION_NS);
            series.add(new Series(MrdHistogram.REQUEST_DURATION, type.code(), requests[type.code()]));
        }
        series.add(new Series(MrdHistogram.REGISTRATION_DURATION, 0, registrationDuration));
        series.add(new Series(MrdHistogram.REGISTRATION_SIZE, 0, registrationSize));
        series.add(new Series(MrdHistogram.MEMORY_EVENT_DURATION, 0, memoryEvent));
        series.add(new Series(MrdHistogram.HEARTBEAT_PINNED, 0, pinned));
        int worstEntries = 0;
        int worstEncoding = 0;
        for (final Series s : series)
        {
            final int needed = s.histogram.total().getNeededByteBufferCapacity();
            worstEntries += HistogramsDescriptor.entryLength(needed);
            worstEncoding = Math.max(worstEncoding, needed);
        }
        if (worstEntries > section.capacity())
        {
            throw new IllegalStateException("the histograms need up to " + worstEntries + " bytes, the section has " +
                section.capacity() + ": grow ControlFileLayout.HISTOGRAMS_LENGTH");
        }
        this.encoding = ByteBuffer.allocate(worstEncoding);
        this.encoded = new UnsafeBuffer(encoding.array());
    }

    public void requestAnswered(final MessageType type, final long startNs)
    {
        final int code = type.code();
        final IntervalHistogram histogram = code < requests.length ? requests[code] : null;
        if (null != histogram)
        {
            histogram.record(System.nanoTime() - startNs);
        }
    }

    public void registered(final long startNs, final long bytes)
    {
        registrationDuration.record(System.nanoTime() - startNs);
        registrationSize.record(bytes);
    }

    public void memoryEventHandled(final long startNs)
    {
        memoryEvent.record(System.nanoTime() - startNs);
    }

    /**
     * The heartbeat thread (or a test): samples the pinned bytes, then rewrites the section with every series
     * recorded so far. Synchronized so that only one thread drains and writes; the recording threads never wait
     * for it.
     */
    public synchronized void publish(final long pinnedBytes, final long nowMs)
    {
        pinned.record(pinnedBytes);
        for (final Series s : series)
        {
            s.histogram.drain();
        }
        section.beginWrite();
        try
        {
            for (final Series s : series)
            {
                encoding.clear();
                final int length = s.histogram.total().encodeIntoByteBuffer(encoding);
                section.putEntry(s.kind.id(), s.label, s.histogram.totalSum(), encoded, length);
            }
        }
        finally
        {
            section.endWrite(nowMs);
        }
    }

    /**
     * @param type the request type of a {@link MrdHistogram#REQUEST_DURATION}, else ignored.
     * @return the series, for tests that record known values.
     */
    IntervalHistogram series(final MrdHistogram kind, final MessageType type)
    {
        for (final Series s : series)
        {
            if (s.kind == kind && (!kind.byRequestType() || s.label == type.code()))
            {
                return s.histogram;
            }
        }
        throw new IllegalArgumentException("no series " + kind + " " + type);
    }

    private record Series(MrdHistogram kind, int label, IntervalHistogram histogram)
    {
    }
}
