package io.mrd.secondary.verbs;

import io.mrd.layout.sys.Posix;
import io.mrd.secondary.DaemonLiveness;
import io.mrd.testing.EmulatedDevice;
import io.mrd.testing.LiveObjects;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

/**
 * The daemon's side of the emulated device, in the test's JVM: the device opened (so its DMA engine runs here),
 * a PD allocated, MRs registered and deregistered with the access a test asks for, as the daemon's provider
 * does; and {@link #importVerbs()}, what a secondary makes of IMPORT_PD's reply.
 */
@SuppressWarnings("restricted")
final class OpenedDevice implements AutoCloseable
{
    static final int LOCAL_WRITE = 1;
    static final int REMOTE_WRITE = 2;
    static final int REMOTE_READ = 4;

    private static final Linker LINKER = Linker.nativeLinker();

    final Path library = EmulatedDevice.library();
    private final MethodHandle regMr;
    private final MethodHandle deregMr;
    private final MethodHandle deallocPd;
    private final MethodHandle closeDevice;
    private final MemorySegment context;
    private final MemorySegment pd;
    private final java.util.List<Mr> live = new java.util.ArrayList<>();

    OpenedDevice() throws Throwable
    {
        final SymbolLookup lookup = SymbolLookup.libraryLookup(library, Arena.global());
        final MethodHandle getDeviceList = bind(lookup, "ibv_get_device_list", FunctionDescriptor.of(ADDRESS, ADDRESS));
        final MethodHandle freeDeviceList = bind(lookup, "ibv_free_device_list", FunctionDescriptor.ofVoid(ADDRESS));
        final MethodHandle openDevice = bind(lookup, "ibv_open_device", FunctionDescriptor.of(ADDRESS, ADDRESS));
        final MethodHandle allocPd = bind(lookup, "ibv_alloc_pd", FunctionDescriptor.of(ADDRESS, ADDRESS));
        regMr = bind(lookup, "ibv_reg_mr", FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS, JAVA_LONG, JAVA_INT));
        deregMr = bind(lookup, "ibv_dereg_mr", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        deallocPd = bind(lookup, "ibv_dealloc_pd", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        closeDevice = bind(lookup, "ibv_close_device", FunctionDescriptor.of(JAVA_INT, ADDRESS));
        final MemorySegment list = ((MemorySegment)getDeviceList.invokeExact(MemorySegment.NULL)).reinterpret(8);
        context = ((MemorySegment)openDevice.invokeExact(list.get(ADDRESS, 0)))
            .reinterpret(IbvStructs.IBV_CONTEXT.byteSize());
        freeDeviceList.invokeExact(list);
        assertFalse(MemorySegment.NULL.equals(context), "ibv_open_device");
        pd = ((MemorySegment)allocPd.invokeExact(context)).reinterpret(IbvStructs.IBV_PD.byteSize());
        assertFalse(MemorySegment.NULL.equals(pd), "ibv_alloc_pd");
    }

    /**
     * @return the device and PD imported, as {@code MrdClient.verbs()} imports them, reporting nothing.
     */
    Verbs importVerbs()
    {
        final int cmdFd = context.get(JAVA_INT, IbvStructs.IBV_CONTEXT.byteOffset(
            java.lang.foreign.MemoryLayout.PathElement.groupElement("cmd_fd")));
        return Verbs.importDevice(library.toString(), Posix.dupCloexec(cmdFd), pd.get(JAVA_INT, IbvStructs.PD_HANDLE),
            EmulatedDevice.DEVICE_NAME, QueueReporter.NONE, DaemonLiveness.UNWATCHED);
    }

    /**
     * An MR of the daemon's PD: what CREATE_MR makes.
     */
    record Mr(MemorySegment struct, int lkey, int rkey)
    {
    }

    Mr register(final MemorySegment memory, final int access) throws Throwable
    {
        final MemorySegment mr = ((MemorySegment)regMr.invokeExact(pd, memory, memory.byteSize(), access))
            .reinterpret(48);
        assertFalse(MemorySegment.NULL.equals(mr), "ibv_reg_mr");
        final Mr registered = new Mr(mr, mr.get(JAVA_INT, 36), mr.get(JAVA_INT, 40));
        live.add(registered);
        return registered;
    }

    /**
     * What a memory free event does to the MR: its keys are dead from here.
     */
    void deregister(final Mr mr) throws Throwable
    {
        live.remove(mr);
        assertEquals(0, (int)deregMr.invokeExact(mr.struct()), "ibv_dereg_mr");
    }

    LiveObjects live()
    {
        return LiveObjects.of(library, context);
    }

    public void close() throws Exception
    {
        try
        {
            for (final Mr mr : java.util.List.copyOf(live))
            {
                deregister(mr);
            }
            assertEquals(0, (int)deallocPd.invokeExact(pd), "ibv_dealloc_pd");
            assertEquals(0, (int)closeDevice.invokeExact(context), "ibv_close_device");
        }
        catch (final Throwable t)
        {
            throw t instanceof Exception ex ? ex : new IllegalStateException(t);
        }
    }

    private static MethodHandle bind(final SymbolLookup lookup, final String name, final FunctionDescriptor descriptor)
    {
        return LINKER.downcallHandle(lookup.find(name).orElseThrow(), descriptor);
    }
}
