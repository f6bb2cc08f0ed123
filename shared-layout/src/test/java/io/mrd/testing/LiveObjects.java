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

/**
 * What a context of the emulated device holds, as {@code mrdemu_live_objects} counts it: every PD, MR, CQ and QP
 * of the context (the ucontext an {@code ibv_open_device} made and every import of its command file shares),
 * whichever process created it; not those of other contexts on the host-wide device (imports are not objects).
 */
@SuppressWarnings("restricted")
public record LiveObjects(int pds, int mrs, int cqs, int qps)
{
    /**
     * @param library the emulator, as loaded by the process ({@link EmulatedDevice#library()}).
     * @param context a {@code struct ibv_context *} of the device (opened or imported) in this process.
     */
    public static LiveObjects of(final Path library, final MemorySegment context)
    {
        final MethodHandle live = Linker.nativeLinker().downcallHandle(
            SymbolLookup.libraryLookup(library, Arena.global()).find("mrdemu_live_objects").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT, ADDRESS, ADDRESS));
        try (Arena arena = Arena.ofConfined())
        {
            final MemorySegment out = arena.allocate(JAVA_INT, 4);
            final int rc = (int)live.invokeExact(context, out);
            if (0 != rc)
            {
                throw new IllegalStateException("mrdemu_live_objects returned " + rc);
            }
            return new LiveObjects(out.getAtIndex(JAVA_INT, 0), out.getAtIndex(JAVA_INT, 1),
                out.getAtIndex(JAVA_INT, 2), out.getAtIndex(JAVA_INT, 3));
        }
        catch (final Throwable t)
        {
            throw t instanceof RuntimeException ex ? ex : new IllegalStateException(t);
        }
    }
}
