package io.mrd.cli;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Where the repository's files are (README.md, scripts/) for tests that read them.
 */
public final class ProjectRoot
{
    private ProjectRoot()
    {
    }

    /**
     * @return Surefire's {@code mrd.project.root}, else the first parent with README.md, pom.xml and cli/.
     */
    public static Path path()
    {
        final String configured = System.getProperty("mrd.project.root");
        if (null != configured && Files.isRegularFile(Path.of(configured, "README.md")))
        {
            return Path.of(configured);
        }
        for (Path dir = Path.of("").toAbsolutePath(); null != dir; dir = dir.getParent())
        {
            if (Files.isRegularFile(dir.resolve("README.md")) && Files.isRegularFile(dir.resolve("pom.xml")) &&
                Files.isDirectory(dir.resolve("cli")))
            {
                return dir;
            }
        }
        throw new AssertionError("cannot find the repository root (README.md) above " + Path.of("").toAbsolutePath());
    }
}
