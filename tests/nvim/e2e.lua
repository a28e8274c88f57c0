-- End to end: the editors/neovim plugin against the real server (python -m hp_lsp) on a copy of the
-- example train.yaml. Steps: attach, wait for the search's diagnostics, hover, apply the "Apply optimal
-- strategy" quick fix, write and check the file on disk (comments intact), break a value and apply its quick
-- fix, then run the server command through :HpApplyOptimalStrategy's function and check its applyEdit.
--
-- Environment: HP_LSP_PYTHON, HP_E2E_FILE (the copy to edit), HP_E2E_BREAK ("key=value": a strategy key and
-- a value the engine rejects with a quick fix, e.g. "tp_size=3").
local T = require('hp_test')

local SEARCH_CODES = { HP610 = true, HP611 = true }

local function lsp_diagnostic(d)
  -- vim.diagnostic entry -> the LSP diagnostic the server published (code, source and data included).
  local lsp = vim.deepcopy((d.user_data or {}).lsp or {})
  lsp.range = lsp.range
    or { start = { line = d.lnum, character = d.col }, ['end'] = { line = d.end_lnum or d.lnum, character = d.end_col or d.col } }
  lsp.message = lsp.message or d.message
  lsp.severity = lsp.severity or d.severity
  lsp.source = lsp.source or d.source
  lsp.code = lsp.code or d.code
  return lsp
end

local function diagnostics(buf, pred)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if pred == nil or pred(d) then
      table.insert(out, d)
    end
  end
  return out
end

local function codes(buf)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    table.insert(out, tostring(d.code) .. ' @' .. d.lnum .. ': ' .. d.message)
  end
  return out
end

local function request(buf, method, params)
  local responses = vim.lsp.buf_request_sync(buf, method, params, 15000) or {}
  for _, response in pairs(responses) do
    if response.error then
      T.log('error from ' .. method, response.error)
    end
    return response.result
  end
end

local function code_actions(buf, diag, only)
  local lsp = lsp_diagnostic(diag)
  return request(buf, 'textDocument/codeAction', {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    range = lsp.range,
    context = { diagnostics = { lsp }, only = only },
  }) or {}
end

-- The code action for `diag` that carries an edit and that `accept` takes: the preferred one among those,
-- else the first. Also returns every action offered (for the failure message).
local function pick_action(buf, diag, accept)
  local offered = code_actions(buf, diag)
  local picked
  for _, action in ipairs(offered) do
    if action.edit and accept(action) and (picked == nil or (action.isPreferred and not picked.isPreferred)) then
      picked = action
    end
  end
  return picked, offered
end

local function find_line(buf, pattern)
  for i, line in ipairs(vim.api.nvim_buf_get_lines(buf, 0, -1, false)) do
    if line:match(pattern) then
      return i - 1, line
    end
  end
end

local function comments(lines)
  local out = {}
  for _, line in ipairs(lines) do
    local c = line:match('(#.*)$')
    if c then
      -- a rewritten value's comment that stated the old value is marked `# was OLD: ...` (docs/editing.md)
      table.insert(out, (c:gsub('^(#%s*)was .-: ', '%1')))
    end
  end
  return out
end

local function read_file(path)
  local f = assert(io.open(path, 'r'))
  local text = f:read('*a')
  f:close()
  return vim.split(text:gsub('\n$', ''), '\n', { plain = true })
end

T.run(function()
  local python = assert(os.getenv('HP_LSP_PYTHON'), 'HP_LSP_PYTHON is not set')
  local path = assert(os.getenv('HP_E2E_FILE'), 'HP_E2E_FILE is not set')
  local break_key, break_value = (os.getenv('HP_E2E_BREAK') or 'tp_size=3'):match('^([%w_]+)=(.+)$')
  local hp = require('hp_lsp')
  hp.setup({ cmd = { python, '-m', 'hp_lsp' } })

  -- 1. Open the copy: the plugin attaches the server.
  vim.cmd('edit ' .. vim.fn.fnameescape(path))
  local buf = vim.api.nvim_get_current_buf()
  T.eq(vim.bo[buf].filetype, 'yaml', 'filetype is yaml')
  local client = T.wait(15000, function()
    local c = hp.get_client(buf)
    return c and c.initialized ~= false and c
  end)
  T.require(client ~= nil, 'hp_lsp attached to ' .. path)
  local original = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local original_comments = comments(original)

  -- 2. The search runs on open: wait for its diagnostic (the stated plan is not the optimal one).
  local search_diag = T.wait(30000, function()
    return diagnostics(buf, function(d) return SEARCH_CODES[tostring(d.code)] end)[1]
  end)
  T.require(search_diag ~= nil, 'a search diagnostic (HP610/HP611) arrives', codes(buf))
  T.log('search diagnostic: ' .. search_diag.code .. ' ' .. search_diag.message)

  -- 3. Hover on the strategy: the stated plan's figures.
  local tp_line = find_line(buf, '^%s+' .. break_key .. '%s*:')
  T.require(tp_line ~= nil, 'the file states ' .. break_key)
  local indent = #(vim.api.nvim_buf_get_lines(buf, tp_line, tp_line + 1, false)[1]:match('^%s*'))
  local hover = request(buf, 'textDocument/hover', {
    textDocument = { uri = vim.uri_from_bufnr(buf) },
    position = { line = tp_line, character = indent + 1 },
  })
  local hover_text = hover and hover.contents and (hover.contents.value or vim.inspect(hover.contents)) or ''
  T.check(hover_text:find('GiB') ~= nil, 'hover on ' .. break_key .. ' shows memory in GiB', hover_text)
  T.log('hover: ' .. hover_text:gsub('\n', ' | '))

  -- 4. The code lens names the best plan.
  local lens = T.wait(10000, function()
    hp.refresh_codelens(buf)
    for _, l in ipairs(vim.lsp.codelens.get(buf) or {}) do
      if l.command and l.command.title:match('^Best:') then
        return l
      end
    end
  end)
  T.check(lens ~= nil, 'a code lens shows the best plan', vim.lsp.codelens.get(buf))

  -- 5. Quick fix "Apply optimal strategy" on the search diagnostic.
  local apply, offered = pick_action(buf, search_diag, function(action)
    return action.title:match('^Apply optimal strategy') ~= nil
  end)
  T.require(apply ~= nil, 'the search diagnostic offers "Apply optimal strategy"', offered)
  T.log('applying: ' .. apply.title)
  vim.lsp.util.apply_workspace_edit(apply.edit, client.offset_encoding)
  local optimal = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  T.check(not vim.deep_equal(optimal, original), 'the strategy changed')
  local best_tp = apply.title:match('tp (%d+)')
  local _, tp_now = find_line(buf, '^%s+tp_size%s*:')
  T.check(best_tp ~= nil and tp_now ~= nil and tp_now:match(':%s*(%d+)') == best_tp,
    'tp_size now holds the best plan\'s tp', { title = apply.title, line = tp_now })
  T.eq(comments(optimal), original_comments, 'every comment survives the rewrite (marked where it stated the old value)')

  -- 6. Write: the file on disk is the buffer, and the search diagnostic goes away after didSave.
  vim.cmd('write')
  T.eq(read_file(path), optimal, 'the written file equals the buffer')
  local cleared = T.wait(30000, function()
    return #diagnostics(buf, function(d) return tostring(d.code) == tostring(search_diag.code) end) == 0
  end)
  T.check(cleared, 'after saving the optimal plan, ' .. search_diag.code .. ' is gone', codes(buf))

  -- 7. Break a value; its diagnostic offers a quick fix that sets a valid one.
  local line_no, line = find_line(buf, '^%s+' .. break_key .. '%s*:')
  local broken = line:gsub('(:%s*)[^%s#]+', '%1' .. break_value, 1)
  vim.api.nvim_buf_set_lines(buf, line_no, line_no + 1, false, { broken })
  local bad = T.wait(15000, function()
    return diagnostics(buf, function(d) return d.lnum == line_no and d.severity == vim.diagnostic.severity.ERROR end)[1]
  end)
  T.require(bad ~= nil, 'breaking ' .. break_key .. ' gives an error on its line', codes(buf))
  T.log('error: ' .. bad.code .. ' ' .. bad.message)
  local fix, fixes = pick_action(buf, bad, function(action)
    return action.kind == 'quickfix'
  end)
  T.require(fix ~= nil, 'the error offers a quick fix', fixes)
  T.log('quick fix: ' .. fix.title)
  vim.lsp.util.apply_workspace_edit(fix.edit, client.offset_encoding)
  local fixed = vim.api.nvim_buf_get_lines(buf, line_no, line_no + 1, false)[1]
  local value = fix.title:match('to (%S+)$')
  T.check(value ~= nil and fixed == line:gsub('(:%s*)[^%s#]+', '%1' .. value, 1), 'the quick fix sets ' .. break_key,
    { line = fixed, title = fix.title })
  T.check(T.wait(15000, function()
    return #diagnostics(buf, function(d) return d.lnum == line_no and d.severity == vim.diagnostic.severity.ERROR end) == 0
  end), 'the error is gone after the fix', codes(buf))

  -- 8. Back to the original strategy, saved; then the server command applies the optimal plan itself.
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, original)
  vim.cmd('write')
  T.require(T.wait(30000, function()
    return diagnostics(buf, function(d) return SEARCH_CODES[tostring(d.code)] end)[1]
  end) ~= nil, 'the search diagnostic is back for the original strategy', codes(buf))
  local result
  T.require(hp.apply_optimal_strategy(buf, function(err, res)
    result = err and { error = err } or res
  end), 'the apply command was sent')
  T.wait(15000, function() return result end)
  T.check(type(result) == 'table' and result.applied == true, 'hpLsp.applyOptimalStrategy reports applied', result)
  T.eq(vim.api.nvim_buf_get_lines(buf, 0, -1, false), optimal, 'the command wrote the same optimal plan as the quick fix')
  vim.cmd('write')
  T.eq(read_file(path), optimal, 'the written file holds the optimal plan')
end)
