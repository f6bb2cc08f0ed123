package io.mrd.layout;

import io.mrd.layout.sys.Posix;

import java.nio.file.Path;
import java.util.Map;

/**
 * Where a daemon's run directory is when nobody says (DESIGN §2): the daemon, its clients and the tools must
 * agree, so the rule lives here once, with who may use one.
 */
public final class RunDirectoryPath
{
    /** Environment variable naming the run directory. */
    public static final String MRD_DIR = "MRD_DIR";
    /** What {@code --dir} says in every command's help: {@link #resolve}'s rule. */
    public static final String DIR_HELP =
        "Run directory of the daemon (default: $MRD_DIR, else $XDG_RUNTIME_DIR/mrd, else /dev/shm/mrd-<uid>).";

    /** Who may read a run directory, for every refusal of one. */
    public static final String WHO_MAY = "run as the daemon's user (the owner) or root, or as a member of a group " +
        "the daemon accepts with 'mrd start --allow-gid' that the run directory's group and mode let in";

    private RunDirectoryPath()
    {
    }

    /**
     * @param path  a run directory or a file in one that this process may not read.
     * @param doing what failed, e.g. {@code "cannot read control file"}.
     * @return EACCES naming the path, what denies access (owner and mode) and who may.
     */
    public static MrdException accessDenied(final Path path, final String doing)
    {
        return FileFailure.of(ErrorCode.EACCES, doing, path, WHO_MAY);
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
