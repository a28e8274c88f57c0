-- A small harness for the headless Neovim tests: assertions that log, and an exit code for pytest.
local T = {}

local log_path = os.getenv('HP_NVIM_LOG')
local failures = 0

function T.log(...)
  local parts = {}
  for i = 1, select('#', ...) do
    local v = select(i, ...)
    parts[#parts + 1] = type(v) == 'string' and v or vim.inspect(v)
  end
  local line = table.concat(parts, ' ')
  if log_path then
    local f = io.open(log_path, 'a')
    if f then
      f:write(line, '\n')
      f:close()
    end
  end
end

--- Record a failed expectation (the test goes on, so one run reports every failure).
function T.check(cond, what, detail)
  if cond then
    T.log('ok    ' .. what)
  else
    failures = failures + 1
    T.log('FAIL  ' .. what .. (detail ~= nil and ('\n      ' .. vim.inspect(detail)) or ''))
  end
  return cond
end

function T.eq(actual, expected, what)
  return T.check(vim.deep_equal(actual, expected), what, { actual = actual, expected = expected })
end

--- Abort the test: the remaining steps depend on this one.
function T.require(cond, what, detail)
  if not T.check(cond, what, detail) then
    error('required step failed: ' .. what, 0)
  end
end

--- Wait (pumping the event loop) until fn() is truthy; returns its value or nil after timeout_ms.
function T.wait(timeout_ms, fn)
  local value
  vim.wait(timeout_ms, function()
    value = fn()
    return value
  end, 20)
  return value
end

--- Run body() and exit Neovim: 0 when every check passed, 1 otherwise (or on an error).
function T.run(body)
  local ok, err = xpcall(body, debug.traceback)
  if not ok then
    failures = failures + 1
    T.log('ERROR ' .. tostring(err))
  end
  T.log(failures == 0 and 'PASSED' or ('FAILED: ' .. failures))
  if failures == 0 then
    vim.cmd('qall!')
  else
    vim.cmd('cquit 1')
  end
end

return T
