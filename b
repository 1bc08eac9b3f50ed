26713 12 7 spanscope
26716 0 0 QXcbEventQueue
26717 0 0 QDBusConnection
26719 4162 329 engine
26720 0 0 store
26721 0 1 engine
26722 3310 9 engine
26723 0 0 Thread (pooled)
26724 0 0 Thread (pooled)
26733 249 244 engine
26734 247 257 engine
26735 326 319 engine
