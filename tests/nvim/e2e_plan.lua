-- End to end: :HpShowPlan and the "▸ Plan view" code lens against the real server on a copy of
-- examples/explain/interleaved.yaml: the scratch buffer shows every stage's lane and the bound;
-- :HpSavePlanTrace writes the plan's Chrome trace next to the file (or where it is told) and says where.
--
-- Environment: HP_LSP_PYTHON, HP_E2E_FILE (the copy to open).
local T = require('hp_test')

T.run(function()
  local python = assert(os.getenv('HP_LSP_PYTHON'), 'HP_LSP_PYTHON is not set')
  local path = assert(os.getenv('HP_E2E_FILE'), 'HP_E2E_FILE is not set')
  local hp = require('hp_lsp')
  hp.setup({ cmd = { python, '-m', 'hp_lsp' } })
  vim.cmd('edit ' .. vim.fn.fnameescape(path))
  local buf = vim.api.nvim_get_current_buf()
  local client = T.wait(15000, function()
    local c = hp.get_client(buf)
    return c and c.initialized ~= false and c
  end)
  T.require(client ~= nil, 'hp_lsp attached to ' .. path)
  T.check(vim.fn.exists(':HpShowPlan') == 2, ':HpShowPlan exists')
  T.check(vim.fn.exists(':HpSavePlanTrace') == 2, ':HpSavePlanTrace exists')

  -- The lens appears once the file's plan is priced.
  local lens = T.wait(30000, function()
    hp.refresh_codelens(buf)
    for _, l in ipairs(vim.lsp.codelens.get(buf) or {}) do
      if l.command and l.command.title == '▸ Plan view' then
        return l
      end
    end
  end)
  T.require(lens ~= nil, 'a ▸ Plan view code lens', vim.lsp.codelens.get(buf))
  T.eq(lens.command.command, 'hpLsp.showPlan', 'the lens runs hpLsp.showPlan')

  -- :HpShowPlan's function: the scratch buffer with the text timeline.
  local done, plan_buf, answer = false, nil, nil
  hp.show_plan(buf, function(err, result, b)
    done, plan_buf, answer = true, b, result
    T.check(err == nil, 'showPlan answered without error', err)
  end)
  T.require(T.wait(30000, function() return done end), 'showPlan answered')
  T.require(plan_buf ~= nil and vim.api.nvim_buf_is_valid(plan_buf), 'a scratch buffer opened', answer)
  local text = table.concat(vim.api.nvim_buf_get_lines(plan_buf, 0, -1, false), '\n')
  for i = 0, 3 do
    T.check(text:find('stage  ' .. i .. ' |', 1, true) ~= nil, 'lane of stage ' .. i, text)
  end
  T.check(text:find('Bound: ', 1, true) ~= nil, 'the bound is named', text)
  T.check(text:find('interleaved 1F1B', 1, true) ~= nil, 'the schedule is named', text)
  T.eq(vim.bo[plan_buf].buftype, 'nofile', 'a scratch buffer')
  T.eq(vim.bo[plan_buf].modifiable, false, 'read-only')
  T.check(vim.fn.bufwinnr(plan_buf) ~= -1, 'shown in a window')

  -- Running the lens (a client-side handler) fills the same buffer again, in place.
  vim.api.nvim_buf_set_option(plan_buf, 'modifiable', true)
  vim.api.nvim_buf_set_lines(plan_buf, 0, -1, false, { 'old' })
  vim.api.nvim_buf_set_option(plan_buf, 'modifiable', false)
  vim.lsp.commands['hpLsp.showPlan'](lens.command, { bufnr = buf, client_id = client.id })
  local refreshed = T.wait(30000, function()
    local first = vim.api.nvim_buf_get_lines(plan_buf, 0, 1, false)[1] or ''
    return first ~= 'old' and first
  end)
  T.check(refreshed ~= nil, 'the lens refreshed the plan buffer', vim.api.nvim_buf_get_lines(plan_buf, 0, 3, false))

  -- :HpSavePlanTrace's function: the default target is the file's path + .trace.json, a Chrome trace.
  local function save(target)
    local got, answer = false, nil
    hp.save_plan_trace(buf, target, function(err, result)
      got, answer = true, result
      T.check(err == nil, 'savePlanTrace answered without error', err)
    end)
    T.require(T.wait(30000, function() return got end), 'savePlanTrace answered')
    return answer
  end
  local default = vim.fn.fnamemodify(path, ':p') .. '.trace.json'
  T.eq(hp.trace_path(buf, nil), default, 'the default trace path')
  local answer = save(nil)
  T.eq(type(answer) == 'table' and answer.written, default, 'written to the default path', answer)
  local ok, trace = pcall(vim.fn.json_decode, table.concat(vim.fn.readfile(default), '\n'))
  T.check(ok and type(trace) == 'table' and type(trace.traceEvents) == 'table' and #trace.traceEvents > 0,
    'the file is a Chrome trace with events', trace)
  -- A relative path is made absolute (against the working directory) before it is sent.
  local dir = vim.fn.fnamemodify(path, ':p:h')
  vim.cmd('cd ' .. vim.fn.fnameescape(dir))
  answer = save('other.trace.json')
  T.eq(type(answer) == 'table' and answer.written, dir .. '/other.trace.json', 'a relative path is resolved', answer)
  T.eq(vim.fn.filereadable(dir .. '/other.trace.json'), 1, 'the relative target exists')
  -- The server's reason reaches the user when nothing can be written (a directory in the way).
  vim.fn.mkdir(dir .. '/taken.json', 'p')
  answer = save(dir .. '/taken.json')
  T.check(type(answer) == 'table' and type(answer.error) == 'string', 'an error answer when the path is a directory',
    answer)
end)
