-- hp_lsp: Neovim client for the HyperParallel language server (`python -m hp_lsp`).
--
--   require('hp_lsp').setup({ cmd = { '/path/to/.venv/bin/python', '-m', 'hp_lsp' },
--                             settings = { hpLsp = { cluster = { numNodes = 8, cardsPerNode = 8 } } } })
--
-- Works on Neovim 0.7 (vim.lsp.start_client + buf_attach_client, one client per root) and 0.8+
-- (vim.lsp.start, which reuses a client per name and root). Neovim 0.7 does not answer
-- `workspace/configuration` for servers that ask only when the capability is advertised, so the settings are
-- pushed with `workspace/didChangeConfiguration` as soon as the server is initialised, on every version.
local M = {}

M.name = 'hp_lsp'
M.server_commands = {
  apply_optimal_strategy = 'hpLsp.applyOptimalStrategy',
  show_plan = 'hpLsp.showPlan',
  save_plan_trace = 'hpLsp.savePlanTrace',
}
M.sniff_lines = 60

local defaults = {
  cmd = { 'python3', '-m', 'hp_lsp' },
  -- Either { hpLsp = { ... } } or the bare section { cluster = { ... }, ... }.
  settings = {},
  filetypes = { 'yaml' },
  root_markers = { '.git', 'pyproject.toml', 'setup.py' },
  codelens = true,
  -- function(bufnr) -> boolean: which buffers to attach; default M.is_hp_buffer.
  match = nil,
  on_attach = nil,
  capabilities = nil,
  handlers = nil,
  cmd_env = nil,
}

M.config = vim.deepcopy(defaults)
-- Lines of the server's window/logMessage notifications, newest last (`:HpShowSearchOutput` shows them).
M.log = {}
local max_log_lines = 2000
-- Neovim 0.7 only: client id per root directory.
local clients_by_root = {}

local function has(feature)
  return vim.fn.has(feature) == 1
end

-- Method call that works with the dot style (<= 0.10) and the colon style (0.11+) of vim.lsp.Client.
local function call(client, method, ...)
  if has('nvim-0.11') then
    return client[method](client, ...)
  end
  return client[method](...)
end

---------------------------------------------------------------------------------------------------------
-- Which buffers are HyperParallel configs (mirrors editors/vscode/src/documents.ts).
---------------------------------------------------------------------------------------------------------

local strong_sections = {
  training = true, accelerator = true, fsdp_config = true, activation_checkpoint = true,
  parallelism = true, constraint = true, pp_config = true, train_yaml = true,
}
local nested_parents = { model = true, cluster = true, train = true }
-- A RUNS file (docs/formats.md §6): a `runs:` list whose items name a config or what was measured.
local runs_items = {
  config = true, step_time_s = true, tokens_per_s_per_device = true, peak_memory_gib = true, log = true,
  trace = true, ascend_profile = true,
}
local strong_nested = {
  pretrained_model_name_or_path = true, tp_size = true, pp_size = true, dp_shard_size = true,
  cards_per_node = true, device_type = true, tp_degree = true, pipeline_parallel_degree = true,
  num_hidden_layers = true,
}

--- True when the file name follows the train*.yaml / *search*.yaml convention.
function M.matches_name(path)
  local base = (path or ''):match('[^/\\]*$'):lower()
  return base:match('^train.*%.ya?ml$') ~= nil or base:match('search.*%.ya?ml$') ~= nil
end

--- True when the first lines show a HyperParallel section (docs/formats.md §1 and §2).
function M.looks_like_hyperparallel(lines)
  local top
  for i, line in ipairs(lines) do
    if i > M.sniff_lines then
      break
    end
    local key = line:match('^([%a_][%w_%-]*)%s*:')
    if key then
      top = key
      if strong_sections[key] then
        return true
      end
    elseif top == 'runs' then
      local item = line:match('^%s*%-?%s*([%a_][%w_]*)%s*:')
      if item and runs_items[item] then
        return true
      end
    elseif top and nested_parents[top] then
      local nested = line:match('^%s+([%a_][%w_]*)%s*:')
      if nested and strong_nested[nested] then
        return true
      end
    end
  end
  return false
end

-- nil or 0 means the current buffer, as in Neovim's own API.
local function resolve_buf(bufnr)
  if bufnr == nil or bufnr == 0 then
    return vim.api.nvim_get_current_buf()
  end
  return bufnr
end

--- Whether a buffer is a train.yaml or search config on disk.
function M.is_hp_buffer(bufnr)
  bufnr = resolve_buf(bufnr)
  if vim.bo[bufnr].buftype ~= '' then
    return false
  end
  local name = vim.api.nvim_buf_get_name(bufnr)
  if name == '' or name:match('^%a[%w+.-]*://') then
    return false
  end
  if M.matches_name(name) then
    return true
  end
  return M.looks_like_hyperparallel(vim.api.nvim_buf_get_lines(bufnr, 0, M.sniff_lines, false))
end

---------------------------------------------------------------------------------------------------------
-- Settings and client configuration.
---------------------------------------------------------------------------------------------------------

--- The settings table sent to the server: always { hpLsp = {...} }.
function M.settings_table(settings)
  settings = settings or {}
  if settings.hpLsp ~= nil then
    return settings
  end
  return { hpLsp = settings }
end

local function dirname(path)
  return vim.fn.fnamemodify(path, ':h')
end

--- The nearest ancestor holding one of the root markers, else the file's own directory.
function M.find_root(path, markers)
  local start = dirname(vim.fn.fnamemodify(path, ':p'))
  local dir = start
  while true do
    for _, marker in ipairs(markers or M.config.root_markers) do
      if (vim.uv or vim.loop).fs_stat(dir .. '/' .. marker) then
        return dir
      end
    end
    local parent = dirname(dir)
    if parent == dir then
      return start
    end
    dir = parent
  end
end

local function buf_for_uri(uri)
  local ok, bufnr = pcall(vim.uri_to_bufnr, uri)
  return ok and bufnr or nil
end

--- Refresh the code lenses of a buffer, however this Neovim version spells it.
function M.refresh_codelens(bufnr)
  if not M.config.codelens then
    return
  end
  bufnr = resolve_buf(bufnr)
  if not vim.api.nvim_buf_is_loaded(bufnr) then
    return
  end
  if vim.lsp.codelens.enable then -- 0.12+: lenses follow the buffer by themselves once enabled
    pcall(vim.lsp.codelens.enable, true, { bufnr = bufnr })
  elseif has('nvim-0.10') then
    pcall(vim.lsp.codelens.refresh, { bufnr = bufnr })
  elseif bufnr == vim.api.nvim_get_current_buf() then
    -- 0.7-0.9 refresh the current buffer only.
    pcall(vim.lsp.codelens.refresh)
  end
end

local function supports_codelens(client)
  if client.server_capabilities then
    return client.server_capabilities.codeLensProvider ~= nil
  end
  return client.resolved_capabilities and client.resolved_capabilities.code_lens
end

local function codelens_autocmds(client, bufnr)
  if not M.config.codelens or not supports_codelens(client) then
    return
  end
  local group = vim.api.nvim_create_augroup('hp_lsp_codelens_' .. bufnr, { clear = true })
  vim.api.nvim_create_autocmd({ 'BufEnter', 'InsertLeave', 'BufWritePost', 'CursorHold' }, {
    group = group,
    buffer = bufnr,
    callback = function()
      M.refresh_codelens(bufnr)
    end,
  })
  M.refresh_codelens(bufnr)
end

local function make_handlers(user_handlers)
  local handlers = {}
  -- Search results arrive as diagnostics; the code lens ("Best: tp 8 ...") changes with them.
  handlers['textDocument/publishDiagnostics'] = function(err, result, ctx, cfg)
    vim.lsp.handlers['textDocument/publishDiagnostics'](err, result, ctx, cfg)
    local bufnr = result and result.uri and buf_for_uri(result.uri)
    if bufnr then
      vim.schedule(function()
        M.refresh_codelens(bufnr)
      end)
    end
  end
  handlers['workspace/codeLens/refresh'] = function()
    vim.schedule(function()
      for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
        if vim.api.nvim_buf_is_loaded(bufnr) and M.get_client(bufnr) then
          M.refresh_codelens(bufnr)
        end
      end
    end)
    return vim.NIL
  end
  handlers['window/logMessage'] = function(err, result, ctx, cfg)
    if result and result.message then
      for line in (result.message .. '\n'):gmatch('(.-)\r?\n') do
        table.insert(M.log, line)
      end
      while #M.log > max_log_lines do
        table.remove(M.log, 1)
      end
    end
    return vim.lsp.handlers['window/logMessage'](err, result, ctx, cfg)
  end
  return vim.tbl_extend('force', handlers, user_handlers or {})
end

local function capabilities(user)
  local caps = vim.lsp.protocol.make_client_capabilities()
  -- The wrapped handler above answers the server's request to refresh lenses.
  caps.workspace = caps.workspace or {}
  caps.workspace.codeLens = vim.tbl_extend('keep', caps.workspace.codeLens or {}, { refreshSupport = true })
  return vim.tbl_deep_extend('force', caps, user or {})
end

--- The client configuration for a buffer (what vim.lsp.start / start_client receive).
function M.client_config(bufnr)
  local opts = M.config
  local settings = M.settings_table(opts.settings)
  return {
    name = M.name,
    cmd = opts.cmd,
    cmd_env = opts.cmd_env,
    root_dir = M.find_root(vim.api.nvim_buf_get_name(bufnr), opts.root_markers),
    settings = settings,
    init_options = settings,
    capabilities = capabilities(opts.capabilities),
    handlers = make_handlers(opts.handlers),
    on_init = function(client)
      call(client, 'notify', 'workspace/didChangeConfiguration', { settings = client.config.settings })
      return true
    end,
    on_attach = function(client, buf)
      codelens_autocmds(client, buf)
      if opts.on_attach then
        opts.on_attach(client, buf)
      end
    end,
  }
end

---------------------------------------------------------------------------------------------------------
-- Attaching.
---------------------------------------------------------------------------------------------------------

local function client_alive(id)
  local client = id and vim.lsp.get_client_by_id(id)
  return client ~= nil and not call(client, 'is_stopped')
end

--- Attach the server to a buffer (starting it for the buffer's root if needed); returns the client id.
function M.attach(bufnr)
  bufnr = resolve_buf(bufnr)
  local cfg = M.client_config(bufnr)
  if vim.lsp.start then
    return vim.lsp.start(cfg, { bufnr = bufnr })
  end
  local id = clients_by_root[cfg.root_dir]
  if not client_alive(id) then
    id = vim.lsp.start_client(cfg)
    clients_by_root[cfg.root_dir] = id
  end
  if id then
    vim.lsp.buf_attach_client(bufnr, id)
  end
  return id
end

--- The clients in `list` that are hp_lsp's (Neovim before 0.10 cannot ask for them by name).
local function ours(list)
  local found = {}
  for _, client in pairs(list) do
    if client.name == M.name then
      table.insert(found, client)
    end
  end
  return found
end

local function clients(bufnr)
  if vim.lsp.get_clients then
    return vim.lsp.get_clients({ bufnr = bufnr, name = M.name })
  end
  return ours(vim.lsp.buf_get_clients(bufnr))
end

--- The hp_lsp client attached to a buffer, if any.
function M.get_client(bufnr)
  bufnr = resolve_buf(bufnr)
  return clients(bufnr)[1]
end

local function all_clients()
  return ours(vim.lsp.get_clients and vim.lsp.get_clients({ name = M.name }) or vim.lsp.get_active_clients())
end

local function maybe_attach(bufnr)
  local match = M.config.match or M.is_hp_buffer
  if match(bufnr) then
    M.attach(bufnr)
  end
end

--- Configure the plugin and attach to YAML buffers that are HyperParallel configs.
function M.setup(opts)
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(defaults), opts or {})
  local group = vim.api.nvim_create_augroup('hp_lsp', { clear = true })
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = M.config.filetypes,
    callback = function(args)
      maybe_attach(args.buf)
    end,
  })
  -- Buffers opened before setup() ran.
  for _, bufnr in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(bufnr) and vim.tbl_contains(M.config.filetypes, vim.bo[bufnr].filetype) then
      maybe_attach(bufnr)
    end
  end
end

---------------------------------------------------------------------------------------------------------
-- Commands.
---------------------------------------------------------------------------------------------------------

--- Run the server command `command` on the buffer (workspace/executeCommand with its URI, then `extra`'s
--- arguments if given). An error is reported here; `on_answer(err, result)` runs after it either way. False,
--- with a warning, when no server is attached to the buffer.
local function execute(bufnr, command, on_answer, extra)
  local client = M.get_client(bufnr)
  if not client then
    vim.notify('hp_lsp: no server attached to this buffer', vim.log.levels.WARN)
    return false
  end
  local arguments = { vim.uri_from_bufnr(bufnr) }
  for _, arg in ipairs(extra or {}) do
    table.insert(arguments, arg)
  end
  local params = { command = command, arguments = arguments }
  call(client, 'request', 'workspace/executeCommand', params, function(err, result)
    if err then
      vim.notify('hp_lsp: ' .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    end
    on_answer(err, result)
  end, bufnr)
  return true
end

--- Ask the server to write the optimal strategy into the buffer (it sends back workspace/applyEdit).
function M.apply_optimal_strategy(bufnr, on_done)
  bufnr = resolve_buf(bufnr)
  return execute(bufnr, M.server_commands.apply_optimal_strategy, function(err, result)
    if not err and type(result) == 'table' and result.applied == false then
      vim.notify('hp_lsp: not applied: ' .. tostring(result.reason or 'no reason given'), vim.log.levels.WARN)
    elseif not err and type(result) == 'table' and result.strategy then
      vim.notify('hp_lsp: applied ' .. tostring(result.strategy), vim.log.levels.INFO)
    end
    if on_done then
      on_done(err, result)
    end
  end)
end

--- A read-only scratch buffer named `name` holding `lines`, shown in a split at the bottom unless a window
--- shows it already. The buffer is created on first use and reused after (its window too), so running a
--- command again refreshes its view instead of stacking splits. opts.filetype: the buffer's filetype;
--- opts.wrap: wrap long lines (default true). Returns the buffer and whether it was created now.
local function open_scratch(name, lines, opts)
  opts = opts or {}
  local bufnr = vim.fn.bufnr(name)
  local new = bufnr == -1 or not vim.api.nvim_buf_is_valid(bufnr)
  if new then
    bufnr = vim.api.nvim_create_buf(false, true)
    vim.bo[bufnr].buftype = 'nofile'
    vim.bo[bufnr].bufhidden = 'hide'
    vim.bo[bufnr].swapfile = false
    if opts.filetype then
      vim.bo[bufnr].filetype = opts.filetype
    end
    pcall(vim.api.nvim_buf_set_name, bufnr, name)
  end
  vim.bo[bufnr].modifiable = true
  vim.api.nvim_buf_set_lines(bufnr, 0, -1, false, lines)
  vim.bo[bufnr].modifiable = false
  if vim.fn.bufwinnr(bufnr) == -1 then
    vim.cmd('botright split')
    vim.api.nvim_win_set_buf(0, bufnr)
    vim.wo.wrap = opts.wrap ~= false
  end
  return bufnr, new
end

--- Put the server's plan view (hpLsp.showPlan's answer) into the source buffer's plan buffer and show it.
local function show_plan_result(source, result)
  local lines
  if type(result) ~= 'table' then
    lines = { 'hp_lsp: no answer from the server' }
  elseif result.error then
    lines = { 'No plan to show: ' .. tostring(result.error) }
  else
    lines = vim.split((result.text or ''):gsub('\n$', ''), '\n', { plain = true })
    if result.stale then
      table.insert(lines, 1, '(best plan from an earlier version: save, then :HpShowPlan again)')
    end
  end
  return open_scratch('hp_lsp://plan/' .. vim.api.nvim_buf_get_name(source), lines,
    { filetype = 'hpplan', wrap = false })
end

--- :HpShowPlan: the plan's per-stage table, what bounds it and the pipeline timeline as text lanes, in a
--- scratch buffer (the server's hpLsp.showPlan; the "▸ Plan view" code lens does the same).
function M.show_plan(bufnr, on_done)
  bufnr = resolve_buf(bufnr)
  return execute(bufnr, M.server_commands.show_plan, function(err, result)
    local plan_buf
    if not err then
      plan_buf = show_plan_result(bufnr, result)
    end
    if on_done then
      on_done(err, result, plan_buf)
    end
  end)
end

--- The file :HpSavePlanTrace writes: `path` made absolute (the server takes only an absolute path), or the
--- buffer's own path + `.trace.json` when none is given.
function M.trace_path(bufnr, path)
  if path == nil or path == '' then
    path = vim.api.nvim_buf_get_name(resolve_buf(bufnr)) .. '.trace.json'
  else
    path = vim.fn.expand(path) -- what the user typed: `~`, `$HOME` and `%` as in any file argument
  end
  return vim.fn.fnamemodify(path, ':p')
end

--- :HpSavePlanTrace [path]: the plan's predicted step as a Chrome trace (the server's hpLsp.savePlanTrace,
--- the file `hp-plan explain --trace` writes); says where it was written, or the server's reason.
function M.save_plan_trace(bufnr, path, on_done)
  bufnr = resolve_buf(bufnr)
  local target = M.trace_path(bufnr, path)
  return execute(bufnr, M.server_commands.save_plan_trace, function(err, result)
    if not err and type(result) == 'table' and type(result.written) == 'string' then
      vim.notify('hp_lsp: plan trace written to ' .. result.written, vim.log.levels.INFO)
    elseif not err then
      local why = type(result) == 'table' and result.error or 'no answer from the server'
      vim.notify('hp_lsp: the plan trace was not written: ' .. tostring(why), vim.log.levels.ERROR)
    end
    if on_done then
      on_done(err, result)
    end
  end, { target })
end

-- Running the "▸ Plan view" code lens shows the plan too (a client-side handler for the server command).
if vim.lsp.commands then
  vim.lsp.commands[M.server_commands.show_plan] = function(command, ctx)
    M.show_plan(ctx and ctx.bufnr or 0)
  end
end

--- Change the settings of the running servers (and of those started later): the table replaces the
--- `hpLsp` section and is pushed with workspace/didChangeConfiguration.
function M.update_settings(settings)
  M.config.settings = settings or {}
  local wrapped = M.settings_table(M.config.settings)
  for _, client in ipairs(all_clients()) do
    client.config.settings = wrapped
    call(client, 'notify', 'workspace/didChangeConfiguration', { settings = wrapped })
  end
end

--- Stop every hp_lsp client and attach the matching buffers again.
function M.restart()
  local attached = {}
  for _, client in ipairs(all_clients()) do
    for bufnr in pairs(client.attached_buffers or {}) do
      table.insert(attached, bufnr)
    end
    call(client, 'stop')
  end
  clients_by_root = {}
  local tries = 0
  local function again()
    tries = tries + 1
    if #all_clients() > 0 and tries < 50 then
      return vim.defer_fn(again, 100)
    end
    for _, bufnr in ipairs(attached) do
      if vim.api.nvim_buf_is_loaded(bufnr) then
        M.attach(bufnr)
      end
    end
  end
  again()
end

--- Open the server's log messages (each search it ran) in a scratch buffer.
function M.show_log()
  open_scratch('hp_lsp://log', #M.log > 0 and M.log or { '(no messages from hp_lsp yet)' })
end

return M
