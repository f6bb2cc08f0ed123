package io.mrd.secondary;

import io.mrd.layout.ErrorCode;
import io.mrd.layout.MrdException;
import io.mrd.layout.sys.Posix;
import org.agrona.UnsafeApi;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;

/**
 * The JVM flags a secondary needs on JDK 25 (scripts/jvm-flags holds the same two, with the same reasons), and
 * the check {@link MrdClient#attach} runs before anything else: without it a worker's first error is an
 * {@code IllegalAccessError} from deep inside Agrona that names neither mrd nor the flag.
 * <p>
 * The check asks the module system, so it works on the class path (flags for {@code ALL-UNNAMED}) and on the
 * module path (flags naming the modules). It must not trigger what it guards against: the class literals below
 * load {@link UnsafeApi} and {@link Posix} without initialising them (their static initialisers are the ones
 * that reach {@code jdk.internal.misc.Unsafe} and bind native functions), and this class's own static state
 * holds neither Agrona nor FFM.
 */
final class JvmFlags
{
    /** What Agrona's {@code UnsafeApi} calls: the package must be exported to Agrona's module. */
    private static final String UNSAFE_PACKAGE = "jdk.internal.misc";

    private JvmFlags()
    {
    }

    /**
     * @throws MrdException EPERM naming every missing flag and where to copy them from.
     */
    static void require()
    {
        final List<String> missing = missing();
        if (!missing.isEmpty())
        {
            throw new MrdException(ErrorCode.EPERM, "this JVM was started without the JVM flags mrd's client " +
                "needs: " + String.join(" ", missing) + " ; add them with java @<mrd checkout>/scripts/jvm-flags " +
                "or copy them from there");
        }
    }

    /**
     * @return each missing flag followed by its reason in parentheses, in the order of scripts/jvm-flags; empty
     *         when nothing is missing.
     */
    static List<String> missing()
    {
        final List<String> missing = new ArrayList<>();
        for (final Module module : nativeCallers())
        {
            if (!module.isNativeAccessEnabled())
            {
                missing.add("--enable-native-access=" + target(module) + " (FFM: mmap of the control file and " +
                    "the daemon's memory, the daemon's socket, libibverbs)");
            }
        }
        final Module agrona = UnsafeApi.class.getModule();
        if (!Object.class.getModule().isExported(UNSAFE_PACKAGE, agrona))
        {
            missing.add("--add-opens=java.base/" + UNSAFE_PACKAGE + "=" + target(agrona) +
                " (Agrona's UnsafeApi, under every buffer of the control file and the protocol)");
        }
        return missing;
    }

    /** The modules that make downcalls: mrd-shared-layout's native calls and this module's verbs. */
    private static Set<Module> nativeCallers()
    {
        final Set<Module> modules = new LinkedHashSet<>();
        modules.add(Posix.class.getModule());
        modules.add(JvmFlags.class.getModule());
        return modules;
    }

    /** @return how a flag names {@code module}. */
    private static String target(final Module module)
    {
        return module.isNamed() ? module.getName() : "ALL-UNNAMED";
    }
}
