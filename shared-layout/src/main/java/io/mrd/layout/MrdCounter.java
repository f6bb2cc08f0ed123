package io.mrd.layout;

/**
 * The daemon's counters, kept in the control file's Agrona counters section.
 * Tools find a counter by its type id ({@link #typeId()}), never by position;
 * {@link #metricName()} is the name {@code mrd stat --prometheus} exports.
 */
public enum MrdCounter
{
    MRS_CREATED("MRs created", "mrs_created_total"),
    MRS_DEREGISTERED("MRs deregistered", "mrs_deregistered_total"),
    MRS_ACTIVE("MRs active", "mrs_active"),
    BYTES_REGISTERED("bytes registered", "registered_bytes"),
    BYTES_PINNED("bytes pinned", "pinned_bytes"),
    /**
     * CREATE_MRs of managed memory, wherever answered (those answered on the event loop too); those of the
     * external window are not counted.
     */
    CREATE_REQUESTS("create requests", "create_requests_total"),
    CREATE_ERRORS_ENOMEM("create errors ENOMEM", "create_errors_enomem_total"),
    CREATE_ERRORS_ENXIO("create errors ENXIO", "create_errors_enxio_total"),
    CREATE_ERRORS_EINVAL("create errors EINVAL", "create_errors_einval_total"),
    CREATE_ERRORS_OTHER("create errors other", "create_errors_other_total"),
    CACHE_ENTRIES("global cache entries", "cache_entries"),
    CACHE_REBUILDS("global cache rebuilds", "cache_rebuilds_total"),
    CACHE_OVERFLOWS("global cache overflows", "cache_overflows_total"),
    ALLOCS("allocations", "allocs_total"),
    FREES("frees", "frees_total"),
    BYTES_ALLOCATED("bytes allocated", "allocated_bytes"),
    MEMORY_EVENTS("memory free events", "memory_events_total"),
    EXTERNAL_REGISTRATIONS("external registrations", "external_registrations_total"),
    CLIENTS_CONNECTED("clients connected", "clients_connected"),
    CLIENTS_TOTAL("clients accepted", "clients_total"),
    PEERS_REJECTED("peers rejected", "peers_rejected_total"),
    REQUESTS("requests", "requests_total"),
    PROTOCOL_ERRORS("protocol errors", "protocol_errors_total"),
    GC_RUNS("garbage collections", "gc_runs_total"),
    DEV_GEN("devGen", "dev_gen"),
    /**
     * CREATE_MRs the daemon answered on its event loop from the global cache, without a worker (a subset of
     * {@link #CREATE_REQUESTS} plus those of the external window). Last, as every counter added later: a
     * counter's type id is its position, and tools skip the ids they do not know, so appending needs no layout
     * version.
     */
    CREATES_ON_EVENT_LOOP("creates on event loop", "creates_on_event_loop_total");

    /** Type ids of mrd counters start here, clear of Agrona's and Aeron's ids. */
    public static final int TYPE_ID_BASE = 0x4D520000;

    private final String label;
    private final String metricName;

    MrdCounter(final String label, final String metricName)
    {
        this.label = label;
        this.metricName = metricName;
    }

    /**
     * @return the type id stored with the counter in the counters metadata.
     */
    public int typeId()
    {
        return TYPE_ID_BASE + ordinal();
    }

    /**
     * @return the label people read in {@code mrd stat}.
     */
    public String label()
    {
        return label;
    }

    /**
     * @return the metric name without the {@code mrd_} prefix.
     */
    public String metricName()
    {
        return metricName;
    }

    /**
     * @return the counter of that type id, or null.
     */
    public static MrdCounter ofTypeId(final int typeId)
    {
        final int index = typeId - TYPE_ID_BASE;
        final MrdCounter[] values = values();
        return index >= 0 && index < values.length ? values[index] : null;
    }
}
