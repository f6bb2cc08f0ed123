package io.mrd.tools;

import io.mrd.layout.ControlFile;
import io.mrd.layout.ControlFileLayout;
import io.mrd.layout.Heartbeat;
import io.mrd.layout.MrdCounter;

/**
 * What a control file's header says about the daemon that wrote it, with the memory it holds: what
 * {@code mrd status} prints, the pid {@code mrd stop} signals, what a new daemon logs about a dead one whose
 * directory it recovers. A few fields read without the seqlock; {@link ControlFileSnapshot} is the whole file
 * read under it, for {@code mrd dump} and {@code mrd check}.
 *
 * @param header         the header's fields ({@link ControlFileSnapshot.Header#read}).
 * @param heartbeat      the heartbeat as it was when they were read.
 * @param bytesAllocated the memory allocated to clients ({@link MrdCounter#BYTES_ALLOCATED}).
 * @param capacity       what the memory-segment lists can hold, in bytes.
 */
public record DaemonSummary(ControlFileSnapshot.Header header, Heartbeat.State heartbeat, long bytesAllocated,
    long capacity)
{
    /**
     * @param ctl a control file whose version has been checked.
     * @return what it says now.
     */
    public static DaemonSummary read(final ControlFile ctl)
    {
        final long now = System.currentTimeMillis();
        final ControlFileSnapshot.Header header = ControlFileSnapshot.Header.read(ctl);
        final ControlFileLayout layout = ctl.layout();
        return new DaemonSummary(header, header.heartbeatAt(now), ctl.counter(MrdCounter.BYTES_ALLOCATED),
            (long)layout.memsegListCount() * layout.segmentsPerList() * header.segmentSize());
    }

    public long pid()
    {
        return header.pid();
    }
}
