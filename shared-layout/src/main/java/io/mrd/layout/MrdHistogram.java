package io.mrd.layout;

import io.mrd.layout.protocol.MessageType;

import java.util.Locale;

/**
 * The daemon's histograms, kept in the control file's histograms section ({@link HistogramsDescriptor}). An entry
 * of the section names its histogram by {@link #id()} and, for {@link #REQUEST_DURATION}, its request type by the
 * {@link MessageType} code; tools skip ids they do not know, so a histogram added last needs no layout version.
 * {@link #metricName()} is the name {@code mrd stat --prometheus} exports, in Prometheus' base units: a duration is
 * recorded in nanoseconds and exported in seconds, a size recorded and exported in bytes.
 */
public enum MrdHistogram
{
    /** From a request's frame decoded to its reply handed to the socket, on a worker or on the event loop. */
    REQUEST_DURATION("request duration", "request_duration_seconds", Unit.NANOSECONDS,
        "time from a request's frame decoded to its reply handed to the socket, by request type"),
    /** One registration by the provider: the pin and the MR, managed or external memory. */
    REGISTRATION_DURATION("registration duration", "registration_duration_seconds", Unit.NANOSECONDS,
        "time the provider took to register one MR (pinning included)"),
    /** Bytes of each MR registered. */
    REGISTRATION_SIZE("registration size", "registration_size_bytes", Unit.BYTES, "bytes of each MR registered"),
    /** A memory free event in the engine: clearing the freed segments from the MRs and rebuilding the cache. */
    MEMORY_EVENT_DURATION("memory event duration", "memory_event_duration_seconds", Unit.NANOSECONDS,
        "time a memory free event held the cache lock (MR segments cleared, global cache rebuilt)"),
    /** The pinned-bytes counter sampled at every heartbeat: how much was pinned for how long. */
    HEARTBEAT_PINNED("pinned bytes per heartbeat", "heartbeat_pinned_bytes", Unit.BYTES,
        "bytes pinned, sampled at every heartbeat: the share of time each amount was pinned");

    /** What the recorded values count. */
    public enum Unit
    {
        /** Recorded in nanoseconds, exported in seconds. */
        NANOSECONDS,
        /** Recorded and exported in bytes. */
        BYTES
    }

    /** The Prometheus label of {@link #REQUEST_DURATION}'s series. */
    public static final String TYPE_LABEL = "type";

    private final String label;
    private final String metricName;
    private final Unit unit;
    private final String help;

    MrdHistogram(final String label, final String metricName, final Unit unit, final String help)
    {
        this.label = label;
        this.metricName = metricName;
        this.unit = unit;
        this.help = help;
    }

    /**
     * @return the id stored in the section's entries.
     */
    public int id()
    {
        return ordinal();
    }

    /**
     * @return the label people read in {@code mrd stat}.
     */
    public String label()
    {
        return label;
    }

    /**
     * @return the metric name without the {@code mrd_} prefix, in base units.
     */
    public String metricName()
    {
        return metricName;
    }

    public Unit unit()
    {
        return unit;
    }

    /**
     * @return the Prometheus HELP text.
     */
    public String help()
    {
        return help;
    }

    /**
     * @return whether its entries are one per request type, told apart by the {@link #TYPE_LABEL} label.
     */
    public boolean byRequestType()
    {
        return this == REQUEST_DURATION;
    }

    /**
     * @param label an entry's label field.
     * @return the request type's name as exported ({@code create_mr}), or null when the histogram has no label
     * or the code is unknown.
     */
    public String labelValue(final int label)
    {
        if (!byRequestType())
        {
            return null;
        }
        final MessageType type = MessageType.of(label);
        return null == type ? null : type.name().toLowerCase(Locale.ROOT);
    }

    /**
     * @return the histogram of that id, or null.
     */
    public static MrdHistogram ofId(final int id)
    {
        final MrdHistogram[] values = values();
        return id >= 0 && id < values.length ? values[id] : null;
    }
}
