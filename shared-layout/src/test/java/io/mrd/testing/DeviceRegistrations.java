package io.mrd.testing;

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

/**
 * The emulated device's own count of registrations ({@code mrdemu_registrations}), as a witness outside mrd: every
 * {@code ibv_reg_mr} that bound pages, in one context ({@link #of}) or on the device by any process, reaped
 * contexts included ({@link #count}: moved by anything else on the host using the emulated device); imports count
 * nothing. A test reads it before and after a daemon adopts its predecessor's MRs: the difference is what the
 * successor registered again.
 */
@SuppressWarnings("restricted")
public final class DeviceRegistrations
{
    private DeviceRegistrations()
    {
    }

    /**
     * The registrations of one context (the ucontext the daemon opened, which every import of its command file
     * shares): unlike {@link #count}, not moved by whatever else on the host uses the emulated device meanwhile.
     *
     * @param context a {@code struct ibv_context *} of this process on that ucontext, such as a client's
     *                {@code Verbs.context()}.
     */
    public static long of(final Path library, final MemorySegment context)
    {
        final MethodHandle registrations = Linker.nativeLinker().downcallHandle(
            SymbolLookup.libraryLookup(library, Arena.global()).find("mrdemu_registrations").orElseThrow(),
            FunctionDescriptor.of(JAVA_LONG, ADDRESS));
        try
        {
            return (long)registrations.invokeExact(context);
        }
        catch (final Throwable t)
        {
            throw t instanceof RuntimeException ex ? ex : new IllegalStateException(t);
        }
    }

    /**
     * Opens the first emulated device in this process (the count is of the device of this process's contexts),
     * reads the device-wide count and closes it again.
     *
     * @param library the emulator ({@link EmulatedDevice#library()}).
     */
    public static long count(final Path library)
    {
        final Linker linker = Linker.nativeLinker();
        final SymbolLookup lookup = SymbolLookup.libraryLookup(library, Arena.global());
        final MethodHandle getDeviceList = linker.downcallHandle(lookup.find("ibv_get_device_list").orElseThrow(),
            FunctionDescriptor.of(ADDRESS, ADDRESS));
        final MethodHandle freeDeviceList = linker.downcallHandle(lookup.find("ibv_free_device_list").orElseThrow(),
            FunctionDescriptor.ofVoid(ADDRESS));
        final MethodHandle openDevice = linker.downcallHandle(lookup.find("ibv_open_device").orElseThrow(),
            FunctionDescriptor.of(ADDRESS, ADDRESS));
        final MethodHandle closeDevice = linker.downcallHandle(lookup.find("ibv_close_device").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT, ADDRESS));
        final MethodHandle registrations = linker.downcallHandle(lookup.find("mrdemu_registrations").orElseThrow(),
            FunctionDescriptor.of(JAVA_LONG, ADDRESS));
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment list = (MemorySegment)getDeviceList.invokeExact(arena.allocate(JAVA_INT));
            if (MemorySegment.NULL.equals(list))
            {
                throw new IllegalStateException("the emulated device lists no device");
            }
            final MemorySegment context;
            try
            {
                context = (MemorySegment)openDevice.invokeExact(list.reinterpret(ADDRESS.byteSize()).get(ADDRESS, 0));
            }
            finally
            {
                freeDeviceList.invokeExact(list);
            }
            if (MemorySegment.NULL.equals(context))
            {
                throw new IllegalStateException("ibv_open_device of the emulated device failed");
            }
            try
            {
                return (long)registrations.invokeExact(MemorySegment.NULL);
            }
            finally
            {
                final int ignored = (int)closeDevice.invokeExact(context);
            }
        }
        catch (final Throwable t)
        {
            throw t instanceof RuntimeException ex ? ex : new IllegalStateException(t);
        }
    }
}
