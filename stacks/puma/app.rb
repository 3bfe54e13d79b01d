# frozen_string_literal: true

# uds-lab's routes as a plain Rack app (no framework) for puma.
#
# Same routes, limits and JSON errors as the Go app (services/app/routes.go);
# the download routes are left out. Standard library only.

require "digest"
require "json"

module LabApp
  MAX_BYTES = 16 << 20 # /bytes/:n, as the Go app
  MAX_SLEEP_MS = 10_000 # /sleep/:ms
  MAX_CPU_ITERATIONS = 1_000_000 # /cpu/:iterations (APP_CPU_MAX_ITERATIONS's default)
  MAX_ECHOED = 100 # characters of a bad value or path echoed in an error

  # One payload built at load (puma.rb preloads the app, so the forked
  # workers share it): byte i is (i % 255) + 1, the Go app's pattern.
  PAYLOAD = ((1..255).to_a.pack("C*") * (MAX_BYTES / 255 + 1)).byteslice(0, MAX_BYTES).freeze
  INT = /\A[+-]?[0-9]+\z/.freeze

  class BadParam < StandardError; end

  def self.truncated(s)
    s.length > MAX_ECHOED ? "#{s[0, MAX_ECHOED]}..." : s
  end

  # Parses a path parameter as Go's strconv.ParseInt would, in [lo, hi].
  def self.int_param(name, raw, lo, hi)
    shown = JSON.generate(truncated(raw))
    raise BadParam, "parameter #{name}=#{shown} is not an integer" unless INT.match?(raw)

    v = Integer(raw, 10)
    unless v >= -(2**63) && v < 2**63
      raise BadParam, "parameter #{name}=#{shown} is out of range: must be between #{lo} and #{hi}"
    end
    raise BadParam, "parameter #{name}=#{v} must not be negative" if v.negative? && lo >= 0
    raise BadParam, "parameter #{name}=#{v} is below the minimum #{lo}" if v < lo
    raise BadParam, "parameter #{name}=#{v} exceeds the maximum #{hi}" if v > hi

    v
  end

  def self.json(status, body)
    data = JSON.generate(body)
    [status, { "content-type" => "application/json; charset=utf-8", "content-length" => data.bytesize.to_s }, [data]]
  end

  def self.bytes(raw)
    n = int_param("n", raw, 0, MAX_BYTES)
    # byteslice shares the payload's memory: no copy of n bytes.
    [200, { "content-type" => "application/octet-stream", "content-length" => n.to_s }, [PAYLOAD.byteslice(0, n)]]
  end

  def self.sleep_ms(raw)
    ms = int_param("ms", raw, 0, MAX_SLEEP_MS)
    sleep(ms / 1000.0) # this thread only: puma's others go on serving
    json(200, { slept_ms: ms })
  end

  def self.cpu(raw)
    n = int_param("iterations", raw, 1, MAX_CPU_ITERATIONS)
    state = ("\0" * 32).b
    n.times { state = Digest::SHA256.digest(state) }
    # Keys in the Go app's order (encoding/json sorts a map's keys).
    json(200, { digest: state.unpack1("H*"), iterations: n })
  end

  ROUTES = [
    [%r{\A/ping\z}, ->(_) { json(200, { message: "pong" }) }],
    [%r{\A/bytes/([^/]+)\z}, ->(raw) { bytes(raw) }],
    [%r{\A/sleep/([^/]+)\z}, ->(raw) { sleep_ms(raw) }],
    [%r{\A/cpu/([^/]+)\z}, ->(raw) { cpu(raw) }],
    [%r{\A/healthz\z}, ->(_) { json(200, { status: "ok" }) }],
    [%r{\A/readyz\z}, ->(_) { json(200, { status: "ready" }) }],
  ].freeze

  # Rack's PATH_INFO is as sent; the Go app routes the percent-decoded path.
  def self.decoded(path)
    path.gsub(/%[0-9A-Fa-f]{2}/) { |m| m[1, 2].hex.chr }.force_encoding(Encoding::UTF_8).scrub
  end

  def self.call(env)
    method = env["REQUEST_METHOD"]
    path = decoded(env["PATH_INFO"].to_s)
    ROUTES.each do |pattern, handler|
      m = pattern.match(path)
      next unless m
      return json(405, { error: "method #{method} not allowed for #{truncated(path)}" }) unless %w[GET HEAD].include?(method)

      begin
        return handler.call(m[1])
      rescue BadParam => e
        return json(400, { error: e.message })
      end
    end
    json(404, { error: "no route for #{method} #{truncated(path)}" })
  end
end
