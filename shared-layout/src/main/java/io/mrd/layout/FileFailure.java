package io.mrd.layout;

import java.io.IOException;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileSystemException;
import java.nio.file.FileSystemLoopException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.NotDirectoryException;
import java.nio.file.Path;
import java.util.Map;

/**
 * A failed file-system operation as mrd reports it. Java's file exceptions carry the errno only as their class
 * or as a reason text, and their message is just a path, so neither may reach a person's line: this turns them
 * into an {@link MrdException} whose code is the errno and whose message says what was being done to which
 * path, what is wrong with it (which directory denies access and its owner and mode, which part of the path is
 * not a directory), and what to do.
 */
public final class FileFailure
{
    private FileFailure()
    {
    }

    /**
     * @return the errno {@code ex} stands for; {@link ErrorCode#EIO} when it names none.
     */
    public static ErrorCode code(final IOException ex)
    {
        final ErrorCode code = switch (ex)
        {
            case NoSuchFileException ignored -> ErrorCode.ENOENT;
            case AccessDeniedException ignored -> ErrorCode.EACCES;
            case FileAlreadyExistsException ignored -> ErrorCode.EEXIST;
            case NotDirectoryException ignored -> ErrorCode.ENOTDIR;
            case FileSystemLoopException ignored -> ErrorCode.ELOOP;
            case FileSystemException fs when null != fs.getReason() -> ErrorCode.ofText(fs.getReason());
            default -> ErrorCode.EUNKNOWN;
        };
        return code == ErrorCode.EUNKNOWN ? ErrorCode.EIO : code;
    }

    /**
     * @param ex    what the file system said.
     * @param doing what failed, e.g. {@code "cannot create run directory"}.
     * @param path  the path it failed on.
     * @param todo  what the person should do.
     * @return {@code doing path: reason: todo} with the errno of {@code ex}.
     */
    public static MrdException of(final IOException ex, final String doing, final Path path, final String todo)
    {
        return of(code(ex), doing, path, todo);
    }

    /**
     * @return {@code doing path: reason: todo} with {@code code}, the reason saying what in the path is wrong.
     */
    public static MrdException of(final ErrorCode code, final String doing, final Path path, final String todo)
    {
        return new MrdException(code, doing + " " + path + ": " + reason(code, path) + ": " + todo);
    }

    /**
     * @return the errno's text, and for EACCES the nearest part of the path whose owner and mode this process can
     * see (the one that denies access: a directory it may not search, or the file itself), for ENOTDIR the part
     * that is not a directory.
     */
    static String reason(final ErrorCode code, final Path path)
    {
        final Path absolute = path.toAbsolutePath().normalize();
        if (code == ErrorCode.EACCES)
        {
            for (Path p = absolute; null != p; p = p.getParent())
            {
                try
                {
                    final Map<String, Object> unix = Files.readAttributes(p, "unix:uid,gid,mode");
                    return code.text() + " by " + p + " (owner uid " + unix.get("uid") + ", group gid " +
                        unix.get("gid") + ", mode " + String.format("%04o", (Integer)unix.get("mode") & 07777) + ")";
                }
                catch (final IOException | UnsupportedOperationException | IllegalArgumentException ignored)
                {
                    // a part this process may not look at either: its parent tells why
                }
            }
        }
        if (code == ErrorCode.ENOTDIR)
        {
            Path prefix = absolute.getRoot();
            for (final Path name : absolute)
            {
                prefix = prefix.resolve(name);
                if (Files.exists(prefix) && !Files.isDirectory(prefix))
                {
                    return prefix + " is not a directory";
                }
            }
        }
        if (code == ErrorCode.EEXIST && Files.exists(absolute, LinkOption.NOFOLLOW_LINKS) &&
            !Files.isDirectory(absolute))
        {
            return "it exists and is not a directory";
        }
        return code.text();
    }
}
