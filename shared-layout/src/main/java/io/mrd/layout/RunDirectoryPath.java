package io.mrd.layout;

import io.mrd.layout.sys.Posix;

import java.nio.file.Path;
import java.util.Map;

/**
 * Where a daemon's run directory is when nobody says (DESIGN §2), what is in it, and who may use one: the
 * daemon, its clients and the tools must agree, so the rule lives here once.
 * <pre>
 *   DIR/mrd.ctl    control file (or a link to it on hugetlbfs), mode 0640      {@link ControlFile#FILE_NAME}
 *   DIR/mrd.sock   Unix socket, mode 0660                                      {@link #SOCKET_FILE}
 *   DIR/mrd.lock   flock held for the daemon's lifetime; left in place on exit {@link #LOCK_FILE}
 *   DIR/mrd.log    daemon log when started in the background                   {@link #LOG_FILE}
 *   DIR/mem/       backing files of the memory-segment lists on tmpfs          {@link #MEM_DIR}
 *   DIR/mrd-hold.sock  the descriptor holder's socket, mode 0600               {@link #HOLD_SOCKET_FILE}
 *   DIR/mrd-hold.log   the descriptor holder's log                             {@link #HOLD_LOG_FILE}
 * </pre>
 */
public final class RunDirectoryPath
{
    /** Environment variable naming the run directory. */
    public static final String MRD_DIR = "MRD_DIR";
    /** What {@code --dir} says in every command's help: {@link #resolve}'s rule. */
    public static final String DIR_HELP =
        "Run directory of the daemon (default: $MRD_DIR, else $XDG_RUNTIME_DIR/mrd, else /dev/shm/mrd-<uid>).";

    /** The daemon's socket, which the clients connect to. */
    public static final String SOCKET_FILE = "mrd.sock";
    /** Locked by the daemon for its whole life; a tool that can take it knows no daemon is there. */
    public static final String LOCK_FILE = "mrd.lock";
    /** The daemon's output when {@code mrd start} runs it in the background. */
    public static final String LOG_FILE = "mrd.log";
    /**
     * The socket of the process that keeps the device's command file and the lists' files for a successor
     * (docs/adoption.md); only the daemon's uid may connect.
     */
    public static final String HOLD_SOCKET_FILE = "mrd-hold.sock";
    /** The holder's output. */
    public static final String HOLD_LOG_FILE = "mrd-hold.log";
    /** The backing files of the memory-segment lists that are not on hugetlbfs. */
    public static final String MEM_DIR = "mem";

    /** What to do about a path that cannot be a run directory, for every refusal of one. */
    public static final String CHOOSE_ANOTHER = "give a directory this user may create or use, with --dir or MRD_DIR";

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
     * @param dir a path given as a run directory that is not a directory, or has a file among its parents.
     * @return ENOTDIR naming it.
     */
    public static MrdException notADirectory(final Path dir)
    {
        return FileFailure.of(ErrorCode.ENOTDIR, "cannot use run directory", dir, CHOOSE_ANOTHER);
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
