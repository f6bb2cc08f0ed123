package io.mrd.testing;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

/**
 * What the installed {@code <infiniband/verbs.h>} says about a struct: a test lists C expressions
 * ({@code offsetof(struct ibv_wc, status)}, {@code sizeof(struct ibv_sge)}), this compiles a program that prints
 * each one and returns the values, so that an FFM layout can be compared with the header field by field.
 * <p>
 * Needs gcc and Debian's libibverbs-dev. Without them the calling test is skipped, unless {@code CI=true} or
 * {@code MRD_REQUIRE_IBVERBS_STANDIN=1}, where it fails.
 */
public final class VerbsHeader
{
    private static final Path HEADER = Path.of("/usr/include/infiniband/verbs.h");

    private VerbsHeader()
    {
    }

    /**
     * @param buildDir    where the program is written and built (a test's temporary directory).
     * @param expressions C expressions of type {@code size_t}.
     * @return each expression's value, in the order given.
     */
    public static Map<String, Long> evaluate(final Path buildDir, final List<String> expressions) throws Exception
    {
        requireToolchain();
        final StringBuilder c = new StringBuilder("#include <infiniband/verbs.h>\n#include <stddef.h>\n" +
            "#include <stdio.h>\nint main(void)\n{\n");
        for (final String expression : expressions)
        {
            c.append("\tprintf(\"%zu\\n\", (size_t)(").append(expression).append("));\n");
        }
        c.append("\treturn 0;\n}\n");
        final Path source = buildDir.resolve("verbs_header.c");
        final Path program = buildDir.resolve("verbs_header");
        Files.writeString(source, c);
        run(List.of("gcc", "-O0", "-Wall", "-Werror", "-o", program.toString(), source.toString()));
        final String[] lines = run(List.of(program.toString())).strip().split("\n");
        assertEquals(expressions.size(), lines.length, "one value per expression");
        final Map<String, Long> values = new LinkedHashMap<>();
        for (int i = 0; i < lines.length; i++)
        {
            values.put(expressions.get(i), Long.parseLong(lines[i].strip()));
        }
        return values;
    }

    private static void requireToolchain()
    {
        final boolean required = "true".equalsIgnoreCase(System.getenv("CI")) ||
            "1".equals(System.getenv("MRD_REQUIRE_IBVERBS_STANDIN"));
        final boolean haveHeader = Files.isRegularFile(HEADER);
        final boolean haveGcc = List.of(System.getenv().getOrDefault("PATH", "/usr/bin:/bin").split(":")).stream()
            .anyMatch(dir -> Files.isExecutable(Path.of(dir.isEmpty() ? "." : dir, "gcc")));
        if (!haveHeader || !haveGcc)
        {
            final String missing = (haveHeader ? "" : HEADER + " (apt-get install libibverbs-dev) ") +
                (haveGcc ? "" : "gcc (apt-get install gcc)");
            if (required)
            {
                fail("cannot compile against verbs.h, missing " + missing);
            }
            assumeTrue(false, "verbs.h offsets not checked, missing " + missing);
        }
    }

    private static String run(final List<String> command) throws IOException, InterruptedException
    {
        final Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        final String output = new String(process.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(process.waitFor(120, TimeUnit.SECONDS), command.get(0) + " did not finish");
        assertEquals(0, process.exitValue(), command + " failed:\n" + output);
        return output;
    }
}
