package io.mrd.layout;

import org.agrona.concurrent.AtomicBuffer;

import static io.mrd.layout.HeaderDescriptor.*;

/**
 * Flyweight over the control file header ({@link HeaderDescriptor}).
 */
public final class ControlHeader
{
    private AtomicBuffer buffer;

    public ControlHeader wrap(final AtomicBuffer buffer)
    {
        this.buffer = buffer;
        return this;
    }

    public AtomicBuffer buffer()
    {
        return buffer;
    }

    public int magic()
    {
        return buffer.getInt(MAGIC_OFFSET);
    }

    public ControlHeader magic(final int value)
    {
        buffer.putInt(MAGIC_OFFSET, value);
        return this;
    }

    /**
     * @return the layout version, read with acquire semantics: once it is non-zero every other header field
     * and section is initialised.
     */
    public int layoutVersion()
    {
        return buffer.getIntVolatile(LAYOUT_VERSION_OFFSET);
    }

    /**
     * Publishes the file: every store before this one is visible to a reader that sees the version.
     */
    public ControlHeader publishLayoutVersion(final int value)
    {
        buffer.putIntRelease(LAYOUT_VERSION_OFFSET, value);
        return this;
    }

    public long epoch()
    {
        return buffer.getLong(EPOCH_OFFSET);
    }

    public ControlHeader epoch(final long value)
    {
        buffer.putLong(EPOCH_OFFSET, value);
        return this;
    }

    public long pid()
    {
        return buffer.getLong(PID_OFFSET);
    }

    public ControlHeader pid(final long value)
    {
        buffer.putLong(PID_OFFSET, value);
        return this;
    }

    public long startTimeMs()
    {
        return buffer.getLong(START_TIME_OFFSET);
    }

    public ControlHeader startTimeMs(final long value)
    {
        buffer.putLong(START_TIME_OFFSET, value);
        return this;
    }

    public long heartbeatMs()
    {
        return buffer.getLongVolatile(HEARTBEAT_OFFSET);
    }

    public ControlHeader heartbeatMs(final long value)
    {
        buffer.putLongRelease(HEARTBEAT_OFFSET, value);
        return this;
    }

    public long fileLength()
    {
        return buffer.getLong(FILE_LENGTH_OFFSET);
    }

    public int flags()
    {
        return buffer.getInt(FLAGS_OFFSET);
    }

    public ControlHeader flags(final int value)
    {
        buffer.putInt(FLAGS_OFFSET, value);
        return this;
    }

    public int heartbeatIntervalMs()
    {
        return buffer.getInt(HEARTBEAT_INTERVAL_OFFSET);
    }

    public ControlHeader heartbeatIntervalMs(final int value)
    {
        buffer.putInt(HEARTBEAT_INTERVAL_OFFSET, value);
        return this;
    }

    /**
     * @return the heartbeat age in ms beyond which the daemon counts as dead, as the daemon published it.
     */
    public int heartbeatStaleLimitMs()
    {
        return buffer.getInt(HEARTBEAT_STALE_LIMIT_OFFSET);
    }

    public ControlHeader heartbeatStaleLimitMs(final int value)
    {
        buffer.putInt(HEARTBEAT_STALE_LIMIT_OFFSET, value);
        return this;
    }

    public long devGen()
    {
        return buffer.getLongAcquire(DEV_GEN_OFFSET);
    }

    public ControlHeader devGen(final long value)
    {
        buffer.putLongRelease(DEV_GEN_OFFSET, value);
        return this;
    }

    public int cacheLen()
    {
        return buffer.getInt(CACHE_LEN_OFFSET);
    }

    public ControlHeader cacheLen(final int value)
    {
        buffer.putInt(CACHE_LEN_OFFSET, value);
        return this;
    }

    public boolean cacheOverflow()
    {
        return buffer.getInt(CACHE_OVERFLOW_OFFSET) != 0;
    }

    public ControlHeader cacheOverflow(final boolean value)
    {
        buffer.putInt(CACHE_OVERFLOW_OFFSET, value ? 1 : 0);
        return this;
    }

    public int mrHighWater()
    {
        return buffer.getInt(MR_HIGH_WATER_OFFSET);
    }

    public ControlHeader mrHighWater(final int value)
    {
        buffer.putInt(MR_HIGH_WATER_OFFSET, value);
        return this;
    }

    public long baseVirtaddr()
    {
        return buffer.getLong(BASE_VIRTADDR_OFFSET);
    }

    public ControlHeader baseVirtaddr(final long value)
    {
        buffer.putLong(BASE_VIRTADDR_OFFSET, value);
        return this;
    }

    public long segmentSize()
    {
        return buffer.getLong(SEGMENT_SIZE_OFFSET);
    }

    public ControlHeader segmentSize(final long value)
    {
        buffer.putLong(SEGMENT_SIZE_OFFSET, value);
        return this;
    }

    public long externalBase()
    {
        return buffer.getLong(EXTERNAL_BASE_OFFSET);
    }

    public ControlHeader externalBase(final long value)
    {
        buffer.putLong(EXTERNAL_BASE_OFFSET, value);
        return this;
    }

    public long externalLength()
    {
        return buffer.getLong(EXTERNAL_LENGTH_OFFSET);
    }

    public ControlHeader externalLength(final long value)
    {
        buffer.putLong(EXTERNAL_LENGTH_OFFSET, value);
        return this;
    }

    public String providerName()
    {
        return ascii(PROVIDER_NAME_OFFSET, PROVIDER_NAME_LENGTH);
    }

    public ControlHeader providerName(final String value)
    {
        putAscii(PROVIDER_NAME_OFFSET, PROVIDER_NAME_LENGTH, value);
        return this;
    }

    /** @return the PD's handle, {@link HeaderDescriptor#NO_PD_HANDLE} without a device. */
    public int pdHandle()
    {
        return buffer.getInt(PD_HANDLE_OFFSET);
    }

    public ControlHeader pdHandle(final int value)
    {
        buffer.putInt(PD_HANDLE_OFFSET, value);
        return this;
    }

    /** @return the devices the daemon registers on ({@link DeviceDescriptor}), 0 without a device. */
    public int deviceCount()
    {
        return buffer.getInt(DEVICE_COUNT_OFFSET);
    }

    public ControlHeader deviceCount(final int value)
    {
        buffer.putInt(DEVICE_COUNT_OFFSET, value);
        return this;
    }

    /** @return the epoch of the daemon whose state this one adopted, 0 when it started afresh. */
    public long adoptedEpoch()
    {
        return buffer.getLong(ADOPTED_EPOCH_OFFSET);
    }

    public ControlHeader adoptedEpoch(final long value)
    {
        buffer.putLong(ADOPTED_EPOCH_OFFSET, value);
        return this;
    }

    /** @return device 0's name, empty without a device. */
    public String deviceName()
    {
        return ascii(DEVICE_NAME_OFFSET, DEVICE_NAME_LENGTH);
    }

    public ControlHeader deviceName(final String value)
    {
        putAscii(DEVICE_NAME_OFFSET, DEVICE_NAME_LENGTH, value);
        return this;
    }

    private String ascii(final int at, final int length)
    {
        return AsciiField.get(buffer, at, length);
    }

    private void putAscii(final int at, final int length, final String value)
    {
        AsciiField.put(buffer, at, length, value);
    }
}
