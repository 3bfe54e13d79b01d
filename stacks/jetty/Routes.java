import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.eclipse.jetty.http.HttpHeader;
import org.eclipse.jetty.server.Handler;
import org.eclipse.jetty.server.Request;
import org.eclipse.jetty.server.Response;
import org.eclipse.jetty.util.Callback;

/**
 * uds-lab's routes on Jetty's core API (no servlets): the same routes, limits
 * and JSON errors as the Go app (services/app/routes.go); the download routes
 * are left out. One handler serves both connectors.
 */
final class Routes extends Handler.Abstract {
    static final int MAX_BYTES = 16 << 20; // /bytes/:n, as the Go app
    static final long MAX_SLEEP_MS = 10000; // /sleep/:ms
    static final long MAX_CPU_ITERATIONS = 1000000; // /cpu/:iterations (APP_CPU_MAX_ITERATIONS's default)
    static final int MAX_ECHOED = 100; // characters of a bad value or path echoed in an error
    static final String JSON = "application/json; charset=utf-8";

    /** Byte i is (i % 255) + 1, the Go app's pattern; a /bytes answer is a slice of it (no copy). */
    private static final byte[] PAYLOAD = new byte[MAX_BYTES];

    static {
        for (int i = 0; i < PAYLOAD.length; i++) {
            PAYLOAD[i] = (byte) (i % 255 + 1);
        }
    }

    /** Set when the stop begins: /readyz answers 503 from then on. */
    final AtomicBoolean draining = new AtomicBoolean();

    /** An error answer: the status and the Go app's {"error": ...}. */
    private static final class Refused extends Exception {
        private static final long serialVersionUID = 1L;
        final int status;

        Refused(int status, String message) {
            super(message, null, false, false);
            this.status = status;
        }
    }

    @Override
    public boolean handle(Request request, Response response, Callback callback) {
        String path = request.getHttpURI().getDecodedPath();
        String method = request.getMethod();
        try {
            route(method, path, response, callback);
        } catch (Refused r) {
            json(response, callback, r.status, "{\"error\":" + quote(r.getMessage()) + "}");
        }
        return true;
    }

    private void route(String method, String path, Response response, Callback callback) throws Refused {
        String route = path;
        String param = null;
        int slash = path.indexOf('/', 1);
        if (slash > 0) {
            route = path.substring(0, slash);
            param = path.substring(slash + 1);
        }
        boolean withParam = route.equals("/bytes") || route.equals("/sleep") || route.equals("/cpu");
        // Exact routes, as gin's: a parameter where one belongs (not empty, no
        // slash in it), none elsewhere, no trailing slash.
        if (withParam != (param != null) || (param != null && (param.isEmpty() || param.indexOf('/') >= 0))) {
            throw new Refused(404, "no route for " + method + " " + truncated(path));
        }
        if (!method.equals("GET") && !method.equals("HEAD")) {
            throw new Refused(405, "method " + method + " not allowed for " + truncated(path));
        }
        switch (route) {
            case "/ping" -> json(response, callback, 200, "{\"message\":\"pong\"}");
            case "/healthz" -> json(response, callback, 200, "{\"status\":\"ok\"}");
            case "/readyz" -> json(response, callback, draining.get() ? 503 : 200,
                    draining.get() ? "{\"status\":\"shutting down\"}" : "{\"status\":\"ready\"}");
            case "/bytes" -> {
                int n = (int) intParam("n", param, 0, MAX_BYTES);
                response.getHeaders().put(HttpHeader.CONTENT_TYPE, "application/octet-stream");
                response.write(true, ByteBuffer.wrap(PAYLOAD, 0, n).asReadOnlyBuffer(), callback);
            }
            case "/sleep" -> {
                long ms = intParam("ms", param, 0, MAX_SLEEP_MS);
                // A timer of the server's scheduler, not a thread held asleep: the
                // answer is written when it fires (to a closed connection, in vain).
                getServer().getScheduler().schedule(
                        () -> json(response, callback, 200, "{\"slept_ms\":" + ms + "}"), ms, TimeUnit.MILLISECONDS);
            }
            case "/cpu" -> {
                long n = intParam("iterations", param, 1, MAX_CPU_ITERATIONS);
                json(response, callback, 200, "{\"digest\":\"" + digest(n) + "\",\"iterations\":" + n + "}");
            }
            default -> throw new Refused(404, "no route for " + method + " " + truncated(path));
        }
    }

    private static void json(Response response, Callback callback, int status, String body) {
        response.setStatus(status);
        response.getHeaders().put(HttpHeader.CONTENT_TYPE, JSON);
        response.write(true, ByteBuffer.wrap(body.getBytes(StandardCharsets.UTF_8)), callback);
    }

    /** SHA-256 iterated n times over a 32-byte state of zeros (the Go app's /cpu), in hex. */
    static String digest(long n) {
        MessageDigest sha;
        try {
            sha = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every Java has SHA-256", e);
        }
        byte[] state = new byte[32];
        for (long i = 0; i < n; i++) {
            state = sha.digest(state);
        }
        StringBuilder hex = new StringBuilder(64);
        for (byte b : state) {
            hex.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
        }
        return hex.toString();
    }

    /** Parses a path parameter as Go's strconv.ParseInt would, in [lo, hi]; the Go app's messages. */
    static long intParam(String name, String raw, long lo, long hi) throws Refused {
        String digits = raw.startsWith("+") || raw.startsWith("-") ? raw.substring(1) : raw;
        if (digits.isEmpty() || !digits.chars().allMatch(c -> c >= '0' && c <= '9')) {
            throw new Refused(400, "parameter " + name + "=" + quote(truncated(raw)) + " is not an integer");
        }
        long v;
        try {
            v = Long.parseLong(raw);
        } catch (NumberFormatException e) {
            throw new Refused(400, "parameter " + name + "=" + quote(truncated(raw))
                    + " is out of range: must be between " + lo + " and " + hi);
        }
        if (v < 0 && lo >= 0) {
            throw new Refused(400, "parameter " + name + "=" + v + " must not be negative");
        }
        if (v < lo) {
            throw new Refused(400, "parameter " + name + "=" + v + " is below the minimum " + lo);
        }
        if (v > hi) {
            throw new Refused(400, "parameter " + name + "=" + v + " exceeds the maximum " + hi);
        }
        return v;
    }

    static String truncated(String s) {
        return s.codePointCount(0, s.length()) <= MAX_ECHOED ? s : s.substring(0, s.offsetByCodePoints(0, MAX_ECHOED)) + "...";
    }

    /** A JSON string: quotes, backslashes and control characters escaped. */
    static String quote(String s) {
        StringBuilder out = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        return out.append('"').toString();
    }
}
