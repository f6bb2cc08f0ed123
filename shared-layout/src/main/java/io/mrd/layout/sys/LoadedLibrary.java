package io.mrd.layout.sys;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Optional;

/**
 * A shared library other than libc opened by name or path (libibverbs, or the emulated device in its place), whose
 * functions are bound with {@code errno} captured the way {@link Posix}'s are. The daemon's ibverbs provider and
 * the secondary's verbs binding open it the same way and fail the same way, each with its own remedy.
 */
@SuppressWarnings("restricted")
public final class LoadedLibrary
{
    private static final Linker LINKER = Linker.nativeLinker();
    private static final Linker.Option CAPTURE_ERRNO = Linker.Option.captureCallState("errno");

    private final String name;
    private final SymbolLookup lookup;

    private LoadedLibrary(final String name, final SymbolLookup lookup)
    {
        this.name = name;
        this.lookup = lookup;
    }

    /**
     * @param library    a path (containing '/') or a soname the dynamic loader resolves.
     * @param arena      how long the library stays loaded.
     * @param notFound   what to do when nothing of that name exists (appended to the error).
     * @param unloadable what to do when the file exists but is no shared library the loader takes.
     * @throws MrdException ENOENT naming the library, which of the two it is, and the remedy.
     */
    public static LoadedLibrary open(
        final String library, final Arena arena, final String notFound, final String unloadable)
    {
        final boolean isPath = library.indexOf('/') >= 0;
        try
        {
            return new LoadedLibrary(library, isPath ? SymbolLookup.libraryLookup(Path.of(library), arena) :
                SymbolLookup.libraryLookup(library, arena));
        }
        catch (final IllegalArgumentException ex)
        {
            throw new MrdException(ErrorCode.ENOENT, isPath && Files.exists(Path.of(library)) ?
                library + " exists but cannot be loaded as a shared library: " + unloadable :
                library + " not found: " + notFound);
        }
    }

    /**
     * @param missing what to do when the library lacks the symbol (appended to the error).
     * @return a downcall handle whose first argument is the call-state segment for {@code errno}.
     * @throws MrdException ENOSYS naming the library, the symbol and the remedy.
     */
    public MethodHandle bind(final String symbol, final FunctionDescriptor descriptor, final String missing)
    {
        final MemorySegment address = lookup.find(symbol).orElseThrow(() ->
            new MrdException(ErrorCode.ENOSYS, name + " has no " + symbol + ": " + missing));
        return LINKER.downcallHandle(address, descriptor, CAPTURE_ERRNO);
    }

    /**
     * @return a handle for an optional symbol (errno captured as by {@link #bind}), or empty when it is absent.
     */
    public Optional<MethodHandle> bindOptional(final String symbol, final FunctionDescriptor descriptor)
    {
        return lookup.find(symbol).map(address -> LINKER.downcallHandle(address, descriptor, CAPTURE_ERRNO));
    }

    /**
     * @return the address of a symbol, for extensions a test or tool binds itself.
     */
    public Optional<MemorySegment> find(final String symbol)
    {
        return lookup.find(symbol);
    }

    /**
     * @return the name or path the library was opened by.
     */
    public String name()
    {
        return name;
    }
}
