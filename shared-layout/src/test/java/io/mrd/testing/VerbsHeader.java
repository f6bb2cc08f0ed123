package io.mrd.testing;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * What the installed {@code <infiniband/verbs.h>} says about a struct: a test lists C expressions
 * ({@code offsetof(struct ibv_wc, status)}, {@code sizeof(struct ibv_sge)}), this compiles a program that prints
 * each one and returns the values, so that an FFM layout can be compared with the header field by field.
 * <p>
 * Compiles with the header {@link EmulatedDevice#cflags()} finds (the system's, or the copy {@code emulator/build}
 * fetches); skipped or failed as {@link EmulatedDevice} says when neither gcc nor the header can be had.
 */
public final class VerbsHeader
{
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
        final List<String> cflags = EmulatedDevice.cflags();
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
        final List<String> command = new ArrayList<>(List.of("gcc", "-O0", "-Wall", "-Werror"));
        command.addAll(cflags);
        command.addAll(List.of("-o", program.toString(), source.toString()));
        run(command);
        final String[] lines = run(List.of(program.toString())).strip().split("\n");
        assertEquals(expressions.size(), lines.length, "one value per expression");
        final Map<String, Long> values = new LinkedHashMap<>();
        for (int i = 0; i < lines.length; i++)
        {
            values.put(expressions.get(i), Long.parseLong(lines[i].strip()));
        }
        return values;
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
