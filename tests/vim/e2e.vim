" Vim + ALE against hp_lsp, headless: vim -N -u NONE -i NONE -n -es -S tests/vim/e2e.vim
" The file is $HP_FILE (a copy of examples/llama3-70b/train.yaml beside its search.yaml); $HP_LSP_PYTHON runs
" the server; each check is logged to $HP_VIM_LOG; exit 0 when all passed (:cquit 1 otherwise). The set-up
" lines marked USER are the recipe editors/README.md gives Vim users.
set nocompatible
let s:log = $HP_VIM_LOG
let s:fails = 0

function! s:Log(msg) abort
  call writefile([a:msg], s:log, 'a')
endfunction

function! s:Check(ok, name, ...) abort
  call s:Log((a:ok ? 'ok   ' : 'FAIL ') . a:name . (a:0 ? ': ' . string(a:1) : ''))
  if !a:ok
    let s:fails += 1
  endif
  return a:ok
endfunction

" Pump Vim (channel callbacks run during :sleep) until Cond() is true or timeout_ms passed.
function! s:Wait(timeout_ms, Cond) abort
  let l:waited = 0
  while l:waited < a:timeout_ms
    if a:Cond()
      return 1
    endif
    sleep 50m
    let l:waited += 50
  endwhile
  return a:Cond()
endfunction

function! s:Finish() abort
  call s:Log(s:fails ? 'FAILED ' . s:fails : 'PASSED')
  if s:fails
    cquit 1
  endif
  qall!
endfunction

" --- USER: ALE, and hp_lsp as an LSP linter for YAML (Debian: apt-get install vim-ale) ----------------
" (a vimrc says `packadd! ale`; under -u NONE plugins are not loaded at startup, so load it now)
packadd ale
filetype plugin on
let g:ale_linters = {'yaml': ['hp_lsp']}
let g:ale_lint_on_enter = 1
call ale#linter#Define('yaml', {
\   'name': 'hp_lsp',
\   'lsp': 'stdio',
\   'executable': {b -> exists('g:hp_lsp_python') ? g:hp_lsp_python : 'python3'},
\   'command': '%e -m hp_lsp',
\   'project_root': {b -> fnamemodify(bufname(b), ':p:h')},
\})
" --- end USER -------------------------------------------------------------------------------------------
let g:hp_lsp_python = $HP_LSP_PYTHON

" Capture what ALE would echo (the hover text).
runtime autoload/ale/util.vim
let s:shown = []
function! ale#util#ShowMessage(string, ...) abort
  call add(s:shown, a:string)
endfunction

function! s:Loclist() abort
  return get(get(g:ale_buffer_info, bufnr(''), {}), 'loclist', [])
endfunction

function! s:Find(code) abort
  for l:item in s:Loclist()
    if get(l:item, 'code', '') is# a:code
      return l:item
    endif
  endfor
  return {}
endfunction

function! s:LineOf(pattern) abort
  return search(a:pattern, 'nw')
endfunction

function! s:Comments() abort
  let l:out = []
  for l:line in getline(1, '$')
    let l:at = match(l:line, '#')
    if l:at >= 0
      call add(l:out, substitute(strpart(l:line, l:at), '^#\s*\zswas .\{-}: ', '', ''))
    endif
  endfor
  return l:out
endfunction

let s:actions = []
function! s:Menu(data, items) abort
  let s:menu_data = a:data
  let s:actions = a:items
endfunction

function! s:Run() abort
  execute 'edit ' . fnameescape($HP_FILE)
  set filetype=yaml
  call s:Check(&filetype is# 'yaml', 'filetype yaml')
  let l:before = getline(1, '$')
  let l:comments = s:Comments()

  " 1. Diagnostics: the search's HP611 (a faster plan fits) arrives in ALE's loclist.
  ALELint
  call s:Wait(90000, {-> !empty(s:Find('HP611'))})
  let l:hp611 = s:Find('HP611')
  if !s:Check(!empty(l:hp611), 'HP611 in the loclist', s:Loclist())
    return
  endif
  call s:Check(l:hp611.text =~# 'faster', 'HP611 says a faster plan fits', l:hp611.text)

  " 2. Hover on tp_size: GiB and seconds (ALE wants the cursor exactly where it asked).
  let l:tp = s:LineOf('^\s\+tp_size:')
  call cursor(l:tp, 4)
  call ale#hover#Show(bufnr(''), l:tp, 4, {})
  call s:Wait(10000, {-> !empty(s:shown)})
  let l:hover = join(s:shown, "\n")
  call s:Check(l:hover =~# '\d GiB' && l:hover =~# '\d\.\d\+ s\>', 'hover shows GiB and seconds', l:hover)

  " 3. Quick fix at HP611: "Apply optimal strategy" rewrites the buffer, comments kept.
  call cursor(l:hp611.lnum, l:hp611.col)
  call ale#codefix#Execute(0, function('s:Menu'))
  call s:Wait(10000, {-> !empty(s:actions)})
  let l:apply = {}
  for [l:kind, l:item] in s:actions
    if l:item.title =~# '^Apply optimal strategy'
      let l:apply = l:item
    endif
  endfor
  if !s:Check(!empty(l:apply), 'code action "Apply optimal strategy"', map(copy(s:actions), 'v:val[1].title'))
    return
  endif
  call ale#codefix#ApplyLSPCodeAction(s:menu_data, l:apply)
  let l:after = getline(1, '$')
  call s:Check(l:after != l:before, 'the quick fix changed the buffer')
  call s:Check(getline(s:LineOf('^\s\+pp_size:')) =~# 'pp_size: 1', 'pp_size is the best plan''s 1',
  \ getline(s:LineOf('^\s\+pp_size:')))
  call s:Check(s:Comments() == l:comments, 'every comment kept', s:Comments())
  call s:Check(getline(s:LineOf('^\s\+pp_interleave_num:')) =~# '# was 5: ', 'the stale comment is marked',
  \ getline(s:LineOf('^\s\+pp_interleave_num:')))
endfunction

try
  call s:Run()
catch
  call s:Check(0, 'script ran to the end', v:exception . ' at ' . v:throwpoint)
endtry
call s:Finish()
