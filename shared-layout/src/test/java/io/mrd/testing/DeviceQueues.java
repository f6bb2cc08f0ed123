package io.mrd.testing;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;
import java.util.Map;
import java.util.TreeMap;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_INT;

/**
 * The live CQs and QPs of a context of the emulated device (the context the given {@code ibv_context} opened or
 * imported; the device is the host's, shared with other tests), each with the process that created it, as
 * {@code mrdemu_handle_creator} says: what a test counts when other processes create and destroy queues of their
 * own while it looks (a {@link LiveObjects} total taken at one instant includes theirs). The handles are read
 * one by one, so a queue created or destroyed during the walk may or may not be in it: count the queues of a
 * process that is not creating or destroying any at the time.
 */
@SuppressWarnings("restricted")
public final class DeviceQueues
{
    // the emulator's EMU_MAX_CQ and EMU_MAX_QP (emulator/src/state.h): every handle the host-wide device can give
    private static final int MAX_HANDLES = 4096;
    // mrdemu.h's MRDEMU_HANDLE_CQ and MRDEMU_HANDLE_QP
    private static final int HANDLE_CQ = 1;
    private static final int HANDLE_QP = 2;

    private final Map<Integer, Integer> cqCreators;
    private final Map<Integer, Integer> qpCreators;

    private DeviceQueues(final Map<Integer, Integer> cqCreators, final Map<Integer, Integer> qpCreators)
    {
        this.cqCreators = cqCreators;
        this.qpCreators = qpCreators;
    }

    /**
     * @param library the emulator, as loaded by the process ({@link EmulatedDevice#library()}).
     * @param context a {@code struct ibv_context *} of the device (opened or imported) in this process.
     */
    public static DeviceQueues of(final Path library, final MemorySegment context)
    {
        final MethodHandle creator = Linker.nativeLinker().downcallHandle(
            SymbolLookup.libraryLookup(library, Arena.global()).find("mrdemu_handle_creator").orElseThrow(),
            FunctionDescriptor.of(JAVA_INT, ADDRESS, JAVA_INT, JAVA_INT));
        return new DeviceQueues(creators(creator, context, HANDLE_CQ), creators(creator, context, HANDLE_QP));
    }

    /** @return the live CQs that process {@code pid} created. */
    public int cqsOf(final long pid)
    {
        return count(cqCreators, pid);
    }

    /** @return the live QPs that process {@code pid} created. */
    public int qpsOf(final long pid)
    {
        return count(qpCreators, pid);
    }

    @Override
    public String toString()
    {
        return "DeviceQueues[cq handle=creator " + cqCreators + ", qp handle=creator " + qpCreators + "]";
    }

    private static Map<Integer, Integer> creators(
        final MethodHandle creator, final MemorySegment context, final int type)
    {
        final Map<Integer, Integer> creators = new TreeMap<>();
        try
        {
            for (int handle = 0; handle < MAX_HANDLES; handle++)
            {
                // a negative errno when the handle is not live (EINVAL) or the device is gone (EIO)
                final int pid = (int)creator.invokeExact(context, type, handle);
                if (pid > 0)
                {
                    creators.put(handle, pid);
                }
            }
        }
        catch (final Throwable t)
        {
            throw t instanceof RuntimeException ex ? ex : new IllegalStateException(t);
        }
        return creators;
    }

    private static int count(final Map<Integer, Integer> creators, final long pid)
    {
        return (int)creators.values().stream().filter(p -> p == pid).count();
    }
}
