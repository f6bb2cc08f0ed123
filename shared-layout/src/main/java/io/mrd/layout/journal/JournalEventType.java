package io.mrd.layout.journal;

/**
 * What a journal record says happened, and what its fields mean for that type (fields not named are 0).
 * The codes are part of the layout: a new type takes a new code, a code is never reused.
 */
public enum JournalEventType
{
    /** The daemon published its control file. Arg: pid. Value: epoch. Length: the journal's bound. */
    DAEMON_STARTED(1),
    /** The daemon shut down gracefully (the last record of its journal). Arg: pid. Value: epoch. */
    DAEMON_STOPPED(2),
    /** A client's HELLO was accepted. Client: its id. Arg: pid. Value: uid. */
    CLIENT_ATTACHED(3),
    /** A peer was refused (peer check, client table full). Arg: pid. Value: uid. Flags: the errno. */
    CLIENT_REFUSED(4),
    /** A client's connection ended (it closed or died) and what it owned was reclaimed. Client, Arg: pid. */
    CLIENT_DISCONNECTED(5),
    /** Memory allocated: recorded before the control file shows it. Client: owner. Address, Length. Flags: access. */
    ALLOC(6),
    /** Memory taken out of use, by FREE or by the reclaim of a gone client. Client: owner. Address, Length. */
    FREE(7),
    /**
     * An MR registered and published: recorded before the control file shows it. Client: owner. Arg: its slot.
     * Address, Length, Lkey, Rkey. Flags: the MR's flags ({@code MrDescriptor.FLAG_EXTERNAL}: external memory).
     */
    MR_CREATED(8),
    /** An MR detached (lookups no longer find it). Client: owner. Arg: slot. Address, Length, Lkey, Rkey. */
    MR_DETACHED(9),
    /** A detached MR deregistered by the garbage collector. Client: owner. Arg: slot. Address, Length, keys. */
    MR_DEREGISTERED(10),
    /** A memory free event over one freed range. Address, Length. Value: devGen after the event. */
    MEMORY_EVENT(11),
    /** A client asked to deregister its external memory. Client. Address. */
    EXTERNAL_DEREGISTERED(12),
    /** The global cache filled up: lookups scan the MR table. Value: the cache's capacity. */
    CACHE_OVERFLOW(13),
    /** The global cache was rebuilt from the MR table. Value: entries. Flags: 1 when it still overflows. */
    CACHE_REBUILT(14),
    /**
     * An MR's keys on a further device of a daemon with several (docs/multi-device.md): one record per device 1,
     * 2, …, right after the MR's {@link #MR_CREATED}, which has device 0's. Client: owner. Arg: slot. Address,
     * Length, Lkey, Rkey: that device's. Value: the device number. Keys do not change while an MR lives, so its
     * detach and deregistration name device 0's only.
     */
    MR_DEVICE_KEYS(15);

    private static final JournalEventType[] BY_CODE = new JournalEventType[16];

    static
    {
        for (final JournalEventType type : values())
        {
            BY_CODE[type.code] = type;
        }
    }

    private final int code;

    JournalEventType(final int code)
    {
        this.code = code;
    }

    /**
     * @return the code stored in {@link JournalRecordDescriptor#TYPE_OFFSET}.
     */
    public int code()
    {
        return code;
    }

    /**
     * @return the type of {@code code}, or null when no type has it (a newer writer's: the reader skips it).
     */
    public static JournalEventType of(final int code)
    {
        return code > 0 && code < BY_CODE.length ? BY_CODE[code] : null;
    }
}
