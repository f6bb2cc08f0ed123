package io.mrd.cli;

import io.mrd.layout.RunDirectoryPath;
import picocli.CommandLine.Option;

import java.nio.file.Path;

/**
 * {@code --dir}, shared by every command that talks to a daemon and, through {@link ControlFileOption}, by
 * those that read its control file.
 */
public final class DirOption
{
    @Option(names = "--dir", paramLabel = "DIR", converter = PathConverter.class,
        description = RunDirectoryPath.DIR_HELP)
    Path dir;

    /**
     * @return the run directory as DESIGN §2 resolves it.
     */
    public Path resolve()
    {
        return RunDirectoryPath.resolve(dir, System.getenv());
    }
}
