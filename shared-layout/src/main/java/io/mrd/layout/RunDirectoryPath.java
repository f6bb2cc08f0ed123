package io.mrd.layout;

import io.mrd.layout.sys.Posix;

import java.nio.file.Path;
import java.util.Map;

/**
 * Where a daemon's run directory is when nobody says (DESIGN §2): the daemon, its clients and the tools must
 * agree, so the rule lives here once.
 */
public final class RunDirectoryPath
{
    /** Environment variable naming the run directory. */
    public static final String MRD_DIR = "MRD_DIR";

    private RunDirectoryPath()
    {
    }

    /**
     * @param explicit the {@code --dir} value, or null.
     * @param env      the environment.
     * @return {@code explicit}, else {@code $MRD_DIR}, else {@code $XDG_RUNTIME_DIR/mrd}, else
     * {@code /dev/shm/mrd-<uid>}; absolute and normalised.
     */
    public static Path resolve(final Path explicit, final Map<String, String> env)
    {
        if (null != explicit)
        {
            return explicit.toAbsolutePath().normalize();
        }
        final String mrdDir = env.get(MRD_DIR);
        if (null != mrdDir && !mrdDir.isBlank())
        {
            return Path.of(mrdDir).toAbsolutePath().normalize();
        }
        final String xdg = env.get("XDG_RUNTIME_DIR");
        if (null != xdg && !xdg.isBlank())
        {
            return Path.of(xdg, "mrd").toAbsolutePath().normalize();
        }
        return Path.of("/dev/shm", "mrd-" + Posix.getuid());
    }
}
