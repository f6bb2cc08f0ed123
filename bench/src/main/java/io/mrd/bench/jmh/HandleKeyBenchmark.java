package io.mrd.bench.jmh;

import io.mrd.bench.fixture.AddressPattern;
import io.mrd.bench.fixture.ClientLiveness;
import io.mrd.secondary.DaemonLiveness;
import io.mrd.secondary.KeyPair;
import io.mrd.secondary.MrCache;
import io.mrd.secondary.RegisteredMemory;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.OperationsPerInvocation;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.infra.Blackhole;

import java.lang.foreign.MemorySegment;
import java.lang.reflect.Constructor;

/**
 * The key from a handle ({@link RegisteredMemory#lkey()} or {@link RegisteredMemory#keyPair()}): what a
 * datapath that keeps buffers from {@code allocateRegistered} does per work request instead of a lookup.
 * Each of the 65,536 buffers of {@link AddressPattern#changingChunk} is represented by the handle of its chunk
 * (8 handles, each buffer in another one than the one before, as in the top-half "other slot" row), so every
 * key is an array load and a field load of a handle the loop cannot hoist, and the client's liveness check
 * ({@link ClientLiveness}).
 * <p>
 * The handles are made reflectively ({@link RegisteredMemory}'s constructor belongs to the client, which makes
 * them from an {@code ALLOC} reply): what is timed is the accessor, whichever daemon made the keys. The table
 * sets it beside the C MRU hit, the cheapest lookup there is.
 */
@State(Scope.Thread)
public class HandleKeyBenchmark
{
    @Param({"lkey", "keyPair"})
    public String key;

    private RegisteredMemory[] buffers;
    private int cursor;

    @Setup(Level.Trial)
    public void setUp() throws ReflectiveOperationException
    {
        final Constructor<RegisteredMemory> constructor = RegisteredMemory.class.getDeclaredConstructor(
            MemorySegment.class, long[].class, int.class, DaemonLiveness.class);
        constructor.setAccessible(true);
        final RegisteredMemory[] handles = new RegisteredMemory[MrCache.TOP_HALF_ENTRIES];
        final DaemonLiveness liveness = ClientLiveness.untripped();
        for (int chunk = 0; chunk < handles.length; chunk++)
        {
            final long[] keysByDevice = {KeyPair.pack(AddressPattern.lkey(chunk), AddressPattern.lkey(chunk) + 1)};
            handles[chunk] = constructor.newInstance(MemorySegment.ofAddress(AddressPattern.chunkStart(chunk))
                .reinterpret(AddressPattern.CHUNK), keysByDevice, 0, liveness);
        }
        final long[] addresses = AddressPattern.changingChunk(handles.length);
        buffers = new RegisteredMemory[addresses.length];
        for (int i = 0; i < addresses.length; i++)
        {
            buffers[i] = handles[(int)((addresses[i] - AddressPattern.BASE) / AddressPattern.CHUNK)];
        }
    }

    @Benchmark
    @OperationsPerInvocation(Batch.SIZE)
    public void handle(final Blackhole blackhole)
    {
        final RegisteredMemory[] buffers = this.buffers;
        int i = cursor;
        if ("lkey".equals(key))
        {
            for (int n = 0; n < Batch.SIZE; n++)
            {
                blackhole.consume(buffers[i].lkey());
                i = (i + 1) & Batch.MASK;
            }
        }
        else
        {
            for (int n = 0; n < Batch.SIZE; n++)
            {
                blackhole.consume(buffers[i].keyPair());
                i = (i + 1) & Batch.MASK;
            }
        }
        cursor = i;
    }
}
