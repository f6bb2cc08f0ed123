package io.mrd.cli.rdma;

import io.mrd.secondary.verbs.Verbs;

import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.invoke.MethodHandle;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * The emulated device's count of unbound transfers ({@code uint64_t mrdemu_unbound_transfers(struct ibv_context *)},
 * emulator/src/mrdemu.h): work requests it refused because a page an MR was bound to at registration was gone, a
 * hole punched in the MR's file or a page frame not the registered one. An HCA would have moved those bytes to or
 * from the page it pinned, memory mrd had already freed: a key handed out for freed memory. The count is the
 * daemon's context's (every secondary imports it), so every side of a test sees one number. A real libibverbs has
 * no such call: {@link #read()} is then -1.
 */
@SuppressWarnings("restricted")
public final class UnboundTransfers
{
    /** The extension's name in the emulated device. */
    public static final String SYMBOL = "mrdemu_unbound_transfers";

    private final Verbs verbs;
    /** Null when the library has no such call (a real libibverbs). */
    private final MethodHandle call;

    /**
     * @param verbs the imported device whose context is counted.
     */
    public UnboundTransfers(final Verbs verbs)
    {
        this.verbs = verbs;
        this.call = verbs.extension(SYMBOL).map(symbol -> Linker.nativeLinker().downcallHandle(
            symbol, FunctionDescriptor.of(JAVA_LONG, ADDRESS))).orElse(null);
    }

    /**
     * @return the transfers refused so far on the context's MRs, -1 when the device cannot say.
     */
    public long read()
    {
        if (null == call)
        {
            return -1;
        }
        try
        {
            return (long)call.invokeExact(verbs.context());
        }
        catch (final Throwable t)
        {
            throw t instanceof RuntimeException ex ? ex : new IllegalStateException(t);
        }
    }
}
