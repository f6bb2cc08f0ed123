package io.mrd.testing;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * The emulated device's settings for this process: variables of the C environment, which the emulator reads
 * when it lists devices ({@value EmulatedDevice#DEVICES_ENV}) and opens one ({@value #MAX_MR_SIZE_ENV}). A JVM
 * cannot change its own environment, so they are set through libc; a test that sets them calls {@link #reset}
 * when it ends, since tests of a module share the process.
 */
public final class EmulatorSettings
{
    /** The emulator's variable for the max_mr_size its devices report and enforce. */
    public static final String MAX_MR_SIZE_ENV = "MRDEMU_MAX_MR_SIZE";

    private static final MethodHandle SETENV = Linker.nativeLinker().downcallHandle(
        Linker.nativeLinker().defaultLookup().find("setenv").orElseThrow(),
        FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS, JAVA_INT));
    private static final MethodHandle UNSETENV = Linker.nativeLinker().downcallHandle(
        Linker.nativeLinker().defaultLookup().find("unsetenv").orElseThrow(),
        FunctionDescriptor.of(JAVA_INT, ADDRESS));

    private EmulatorSettings()
    {
    }

    /**
     * How many devices the emulator lists from now on ({@code mrdemu0} … {@code mrdemu<count-1>}).
     */
    public static void devices(final int count)
    {
        set(EmulatedDevice.DEVICES_ENV, Integer.toString(count));
    }

    /**
     * The max_mr_size of devices opened from now on; 0 for the emulator's default.
     */
    public static void maxMrSize(final long bytes)
    {
        set(MAX_MR_SIZE_ENV, 0 == bytes ? null : Long.toString(bytes));
    }

    /**
     * Back to the emulator's defaults: one device, its own max_mr_size.
     */
    public static void reset()
    {
        set(EmulatedDevice.DEVICES_ENV, null);
        set(MAX_MR_SIZE_ENV, null);
    }

    private static void set(final String name, final String value)
    {
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment cName = arena.allocateFrom(name);
            final int rc = null == value ? (int)UNSETENV.invokeExact(cName) :
                (int)SETENV.invokeExact(cName, arena.allocateFrom(value), 1);
            if (0 != rc)
            {
                throw new IllegalStateException((null == value ? "unsetenv " : "setenv ") + name + " failed");
            }
        }
        catch (final Throwable t)
        {
            throw t instanceof RuntimeException ex ? ex : new IllegalStateException(t);
        }
    }
}
